import { BACKUP_PHASES, ENDED_BACKUP_PHASES, PVB_PHASES } from '@stowage/core';
import { z } from 'zod';
import {
  dns1123NameParam,
  isoTime,
  pageOf,
  pageQuery,
  phaseCounts,
  runScope,
  runTimes,
  storageCostSchema,
  volumeOperationStatus,
} from './shared.schema.js';

/*
 * Wire schemas of the API. Responses are described for the OpenAPI document and checked by the
 * serializer; request bodies of POST /v1/backups are validated by core (see backups.routes.ts).
 */

/** Backup (and restore) phases after which nothing changes. */
export const TERMINAL_BACKUP_PHASES: ReadonlySet<string> = new Set(ENDED_BACKUP_PHASES);

/** A backup name in a URL: a DNS-1123 label (anything else can never name a backup). */
export const backupNameParam = dns1123NameParam('backup');

export const backupParams = z.object({ name: backupNameParam });

export const problemSchema = z.object({ path: z.string(), message: z.string() });

export const errorResponseSchema = z
  .object({
    error: z.object({
      code: z.string().describe('Stable error code (API_*)'),
      message: z.string(),
      requestId: z.string(),
      problems: z.array(problemSchema).optional().describe('Every validation problem with its JSON path'),
    }),
  })
  .describe('Error');

const labelsSchema = z.record(z.string(), z.string()).describe("The backup's labels, as submitted (Velero's metadata.labels)");

export const pvbCountsSchema = phaseCounts(PVB_PHASES);

export const hookRunSchema = z.object({
  pod: z.string().describe('namespace/name'),
  container: z.string(),
  phase: z.enum(['pre', 'post']),
  source: z.string(),
  command: z.array(z.string()),
  outcome: z
    .string()
    .describe(
      'exited, timeout, error, skipped, invalid; running while in flight; interrupted when its job was cut off (the hook ran again)',
    ),
  exitCode: z.number().int().optional(),
  startedAt: isoTime.optional(),
  endedAt: isoTime.optional(),
  durationMs: z.number().optional().describe('endedAt - startedAt'),
  stdoutTail: z.string().optional().describe("The last bytes of the hook's stdout"),
  stderrTail: z.string().optional().describe("The last bytes of the hook's stderr"),
  message: z.string().optional(),
  hookName: z.string().optional().describe('The spec hook set or backup hook it comes from'),
  try: z.number().int().optional().describe('A hook with retries: which try this run was (1-based)'),
  tries: z.number().int().optional().describe('A hook with retries: how many tries it may take (1 + retries.max)'),
});

const backupHookPhaseSchema = z.object({
  doneAt: isoTime,
  failed: z.string().optional().describe('A hook with onError: Fail failed (pre: the backup failed before any block ran)'),
  hooksRun: z.number().int(),
  hooksFailed: z.number().int(),
  runs: z.array(hookRunSchema).describe('Every run, each try of each hook in each pod'),
});

export const backupSchema = z
  .object({
    name: z.string(),
    ...runScope,
    uid: z.string(),
    phase: z.string().describe(`One of ${BACKUP_PHASES.join(', ')}`),
    spec: z.unknown().describe('The backup spec as submitted'),
    requestId: z.string().optional(),
    progress: z.object({ totalItems: z.number().int(), itemsBackedUp: z.number().int() }),
    hookStatus: z.object({ hooksAttempted: z.number().int(), hooksFailed: z.number().int() }),
    podVolumeBackups: pvbCountsSchema.describe('PodVolumeBackups by phase'),
    errors: z.number().int(),
    warnings: z.number().int(),
    storage: storageCostSchema,
    failureReason: z.string().optional(),
    ...runTimes,
    cancelRequestedAt: isoTime.optional(),
    expiration: isoTime.optional().describe('When the backup is deleted (created + spec.ttl); absent when it never expires'),
    labels: labelsSchema.optional(),
    annotations: z.record(z.string(), z.string()).optional().describe("The backup's annotations, as submitted"),
    backupHooks: z
      .object({ pre: backupHookPhaseSchema.optional(), post: backupHookPhaseSchema.optional() })
      .optional()
      .describe('What the backup-level hooks (spec.hooks.backup) did: pre before the first block, post after every block'),
  })
  .describe('Backup');

export const backupSummarySchema = z.object({
  name: z.string(),
  ...runScope,
  uid: z.string(),
  phase: z.string(),
  ...runTimes,
  expiration: isoTime.optional().describe('When the backup is deleted (created + spec.ttl); absent when it never expires'),
  labels: labelsSchema.optional(),
});

export const backupListSchema = pageOf(backupSummarySchema);

export const listBackupsQuery = pageQuery(50, { phase: z.enum(BACKUP_PHASES).optional() }, { runs: true });

export const blocksQuery = pageQuery(100);

export const blockPvbSchema = z.object({
  name: z.string(),
  pod: z.string().describe('namespace/name'),
  node: z.string(),
  volume: z.string(),
  ...volumeOperationStatus,
});

export const blockSchema = z.object({
  id: z.string(),
  state: z.string(),
  pods: z.array(z.string()).describe('namespace/name of each pod in the block'),
  itemCount: z.number().int(),
  itemsWritten: z.number().int().optional(),
  failedPods: z.array(z.string()).optional(),
  skipped: z.string().optional().describe('Why the whole block was skipped (a pre hook with onError: FailBlock failed): no item, no PVB'),
  error: z.string().optional(),
  startedAt: isoTime.optional(),
  itemsDoneAt: isoTime.optional().describe("When the block's items were written (after its pre hooks)"),
  completedAt: isoTime.optional(),
  podVolumeBackups: z.array(blockPvbSchema),
  hookRuns: z.array(hookRunSchema),
  volumes: z
    .array(
      z.object({
        pod: z.string().describe('namespace/name'),
        volume: z.string(),
        outcome: z.enum(['backed-up', 'snapshotted', 'planned', 'skipped', 'error']),
        reason: z.string().optional(),
        pvb: z.string().optional().describe('the PVB that backs it up (see podVolumeBackups)'),
        claimName: z.string().optional(),
        snapshot: z
          .object({
            name: z.string(),
            method: z.enum(['kept', 'moved']),
            className: z.string(),
            phase: z.string(),
            cutAt: z.number().optional().describe('epoch ms of the cut: the point in time the snapshot holds'),
            completedAt: z.number().optional(),
            repositorySnapshotId: z.string().optional(),
            bytes: z.number().optional(),
            message: z.string().optional(),
          })
          .optional()
          .describe('A snapshotted volume: its CSI VolumeSnapshot, kept in the cluster or its data moved into the repository'),
      }),
    )
    .optional()
    .describe("Every volume of the block's pods: backed up, planned, or skipped / an error with the reason"),
});

export const blockListSchema = z.object({ items: z.array(blockSchema), total: z.number().int(), nextCursor: z.string().optional() });

export const acceptedSchema = z.object({ name: z.string(), phase: z.string(), cancelRequested: z.literal(true) });
export const deletedSchema = z.object({ name: z.string(), deleted: z.literal(true) });
export const deletingSchema = z
  .object({ name: z.string(), phase: z.string(), deleting: z.literal(true) })
  .describe('The deletion is under way (a running backup is being canceled first)');

/** Documented shape of the POST body (validated by core, which lists every problem at once). */
export const createBackupBodySchema = z
  .object({
    name: z.string().optional().describe('DNS-1123 label; generated when absent'),
    namespace: z
      .string()
      .optional()
      .describe(
        'A namespaced backup (a Backup of that namespace: needs `create backups` there; its selection is narrowed to it and anything wider is a 400). Its name in the API is `<namespace>-<name>-<hash>`. Absent: a cluster-wide backup (`create clusterbackups`).',
      ),
    labels: z
      .record(z.string(), z.string())
      .optional()
      .describe('Labels of the backup (keys and values as Kubernetes labels); `stowage backup get --selector` finds backups by them'),
    annotations: z.record(z.string(), z.string()).optional().describe('Annotations of the backup (at most 256 KiB together)'),
    spec: z
      .record(z.string(), z.unknown())
      .describe(
        'Velero-style backup spec (includedNamespaces, labelSelector, hooks, ...). Beyond Velero: hooks.backup.pre[]/post[] ' +
          '({name, namespace, labelSelector, container, mode: all|one, command, timeout, onError: Continue|Fail, retries}) run once ' +
          'before the first block / after every block; each pod hook exec takes retries {max, backoff}, post hooks executionPolicy ' +
          'Always|OnSuccess|OnFailure, pre hooks onError FailBlock (the whole block is skipped). Every list and size is bounded (400 naming the field and ' +
          'the limit): 1000 namespaces and 500 resources per list, 500 hooks in all, 50 per list, 64 KiB of argv per hook, hook timeouts up to 30m by default',
      ),
  })
  .describe('CreateBackupRequest');

export const standardErrors = {
  400: errorResponseSchema,
  401: errorResponseSchema,
  403: errorResponseSchema,
  404: errorResponseSchema,
} as const;
