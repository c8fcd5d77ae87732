/*
 * The `stowage.dev/v1` resources: namespaced Backup, Restore and Schedule (acting on their own
 * namespace), cluster-scoped ClusterBackup, ClusterRestore and ClusterSchedule (the whole
 * cluster). Their specs are core's (Velero's field names); their statuses mirror the REST views.
 * Both are zod schemas here, and the CRDs in k8s/base are generated from them (crds.ts).
 */
import { backupSpecSchema, restoreSpecSchema, scheduleSpecSchema } from '@stowage/core';
import { z } from 'zod';

export const STOWAGE_GROUP = 'stowage.dev';
export const STOWAGE_VERSION = 'v1';
export const STOWAGE_API_VERSION = `${STOWAGE_GROUP}/${STOWAGE_VERSION}`;

/** What a resource is to the pipeline: a backup, a restore or a schedule. */
export type RunKind = 'backup' | 'restore' | 'schedule';

export interface ResourceKind {
  kind: 'Backup' | 'ClusterBackup' | 'Restore' | 'ClusterRestore' | 'Schedule' | 'ClusterSchedule';
  plural: string;
  singular: string;
  namespaced: boolean;
  run: RunKind;
}

export const RESOURCE_KINDS: readonly ResourceKind[] = [
  { kind: 'Backup', plural: 'backups', singular: 'backup', namespaced: true, run: 'backup' },
  { kind: 'ClusterBackup', plural: 'clusterbackups', singular: 'clusterbackup', namespaced: false, run: 'backup' },
  { kind: 'Restore', plural: 'restores', singular: 'restore', namespaced: true, run: 'restore' },
  { kind: 'ClusterRestore', plural: 'clusterrestores', singular: 'clusterrestore', namespaced: false, run: 'restore' },
  { kind: 'Schedule', plural: 'schedules', singular: 'schedule', namespaced: true, run: 'schedule' },
  { kind: 'ClusterSchedule', plural: 'clusterschedules', singular: 'clusterschedule', namespaced: false, run: 'schedule' },
];

export function resourceKind(run: RunKind, namespaced: boolean): ResourceKind {
  const kind = RESOURCE_KINDS.find((k) => k.run === run && k.namespaced === namespaced);
  if (!kind) throw new Error(`no resource kind for ${run} (namespaced: ${namespaced})`);
  return kind;
}

/** The collection path of a kind (all namespaces for a namespaced kind without `namespace`). */
export function collectionPathOf(kind: ResourceKind, namespace?: string): string {
  const base = `/apis/${STOWAGE_GROUP}/${STOWAGE_VERSION}`;
  return kind.namespaced && namespace ? `${base}/namespaces/${namespace}/${kind.plural}` : `${base}/${kind.plural}`;
}

export function objectPathOf(kind: ResourceKind, namespace: string | undefined, name: string): string {
  return `${collectionPathOf(kind, kind.namespaced ? namespace : undefined)}/${encodeURIComponent(name)}`;
}

/** Finalizer on every resource the controller has seen: deleting it deletes the run's data first. */
export const DELETE_FINALIZER = 'stowage.dev/delete';

/**
 * On a resource the controller made for a run that had none (REST, a schedule's tick, backup
 * sync): the run's name. Such a resource stands for that run, and goes when the run is deleted.
 */
export const RUN_ANNOTATION = 'stowage.dev/run';

/**
 * The account a namespaced resource acts as (`spec.serviceAccountName`, in its namespace; default
 * `default`): Kubernetes does not tell a controller who created an object, so a namespaced
 * resource names the identity whose rights its hooks and mapped restores are checked against.
 */
const serviceAccountName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/)
  .max(253)
  .describe(
    'The ServiceAccount of this namespace the resource acts as: spec hooks run only in pods it may exec in, a restore maps only into namespaces it may write in. Default "default".',
  );

export const namespacedBackupSpecSchema = backupSpecSchema.extend({ serviceAccountName: serviceAccountName.optional() });
export const namespacedRestoreSpecSchema = restoreSpecSchema.extend({ serviceAccountName: serviceAccountName.optional() });
export const namespacedScheduleSpecSchema = scheduleSpecSchema.extend({ serviceAccountName: serviceAccountName.optional() });

export const conditionSchema = z.object({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string(),
  message: z.string(),
  lastTransitionTime: z.string(),
  observedGeneration: z.number().int().optional(),
});

const common = {
  phase: z.string().optional(),
  /** The pipeline's name of the run: the REST name and the directory in backup storage. */
  runName: z.string().optional().describe('The name Stowage stores this run under (REST API, backup storage)'),
  requestedBy: z.string().optional().describe('Whose rights hooks and restores are checked against'),
  errors: z.number().int().optional(),
  warnings: z.number().int().optional(),
  failureReason: z.string().optional(),
  validationErrors: z.array(z.string()).optional().describe('Every problem with the spec, each naming its field'),
  conditions: z.array(conditionSchema).optional(),
  observedGeneration: z.number().int().optional(),
};

const progress = (done: string) =>
  z.object({
    totalItems: z.number().int(),
    [done]: z.number().int(),
    summary: z.string().describe('done/total items, for the Progress column'),
  });

export const backupStatusSchema = z.object({
  ...common,
  progress: progress('itemsBackedUp').optional(),
  hookStatus: z.object({ hooksAttempted: z.number().int(), hooksFailed: z.number().int() }).optional(),
  podVolumeBackups: z.object({ total: z.number().int(), completed: z.number().int(), failed: z.number().int() }).optional(),
  startTimestamp: z.string().optional(),
  completionTimestamp: z.string().optional(),
  expiration: z.string().optional(),
  storageLocation: z.string().optional(),
  archive: z.string().optional().describe("Where the backup's files are in backup storage"),
});

export const restoreStatusSchema = z.object({
  ...common,
  backupRunName: z.string().optional().describe('The name Stowage stores the restored backup under'),
  progress: progress('itemsRestored').optional(),
  podVolumeRestores: z.object({ total: z.number().int(), completed: z.number().int(), failed: z.number().int() }).optional(),
  startTimestamp: z.string().optional(),
  completionTimestamp: z.string().optional(),
});

export const scheduleStatusSchema = z.object({
  ...common,
  lastBackup: z.string().optional(),
  lastBackupTime: z.string().optional(),
  lastSuccessfulBackup: z.string().optional(),
  nextRunTime: z.string().optional(),
  paused: z.boolean().optional(),
  skipped: z.number().int().optional(),
  lastSkipReason: z.string().optional(),
});

export type BackupResourceStatus = z.infer<typeof backupStatusSchema>;
export type RestoreResourceStatus = z.infer<typeof restoreStatusSchema>;
export type ScheduleResourceStatus = z.infer<typeof scheduleStatusSchema>;
export type Condition = z.infer<typeof conditionSchema>;

export function specSchemaOf(kind: ResourceKind): z.ZodType {
  switch (kind.run) {
    case 'backup':
      return kind.namespaced ? namespacedBackupSpecSchema : backupSpecSchema;
    case 'restore':
      return kind.namespaced ? namespacedRestoreSpecSchema : restoreSpecSchema;
    case 'schedule':
      return kind.namespaced ? namespacedScheduleSpecSchema : scheduleSpecSchema;
  }
}

export function statusSchemaOf(kind: ResourceKind): z.ZodType {
  switch (kind.run) {
    case 'backup':
      return backupStatusSchema;
    case 'restore':
      return restoreStatusSchema;
    case 'schedule':
      return scheduleStatusSchema;
  }
}

interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  priority?: number;
}

/** `kubectl get` columns (the API server prints them; `-o wide` adds priority 1). */
export function printerColumnsOf(kind: ResourceKind): PrinterColumn[] {
  const age: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };
  const phase: PrinterColumn = { name: 'Phase', type: 'string', jsonPath: '.status.phase' };
  const problems: PrinterColumn[] = [
    { name: 'Errors', type: 'integer', jsonPath: '.status.errors' },
    { name: 'Warnings', type: 'integer', jsonPath: '.status.warnings' },
  ];
  const wide: PrinterColumn[] = [
    { name: 'Requested-By', type: 'string', jsonPath: '.status.requestedBy', priority: 1 },
    { name: 'Run', type: 'string', jsonPath: '.status.runName', priority: 1 },
  ];
  switch (kind.run) {
    case 'backup':
      return [
        phase,
        { name: 'Progress', type: 'string', jsonPath: '.status.progress.summary', description: 'Items backed up of the items planned' },
        ...problems,
        { name: 'Expires', type: 'string', jsonPath: '.status.expiration' },
        age,
        ...wide,
      ];
    case 'restore':
      return [
        phase,
        { name: 'Backup', type: 'string', jsonPath: '.spec.backupName' },
        { name: 'Progress', type: 'string', jsonPath: '.status.progress.summary', description: 'Items restored of the items planned' },
        ...problems,
        age,
        ...wide,
      ];
    case 'schedule':
      return [
        phase,
        { name: 'Schedule', type: 'string', jsonPath: '.spec.schedule' },
        { name: 'Paused', type: 'boolean', jsonPath: '.spec.paused' },
        { name: 'Last-Backup', type: 'string', jsonPath: '.status.lastBackup' },
        { name: 'Next-Run', type: 'string', jsonPath: '.status.nextRunTime' },
        age,
        ...wide.slice(0, 1),
      ];
  }
}
