import { BACKUP_PHASES, ENDED_BACKUP_PHASES } from '@stowage/core';
import { z } from 'zod';

/*
 * Wire schemas of the API. Responses are described for the OpenAPI document and checked by the
 * serializer; request bodies of POST /v1/backups are validated by core (see backups.routes.ts).
 */

/** Backup (and restore) phases after which nothing changes. */
export const TERMINAL_BACKUP_PHASES: ReadonlySet<string> = new Set(ENDED_BACKUP_PHASES);

/** A backup name in a URL: a DNS-1123 label (anything else can never name a backup). */
export const backupNameParam = z
  .string()
  .max(63, 'a backup name is at most 63 characters')
  .regex(
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/,
    'a backup name is a DNS-1123 label: lowercase letters, digits and "-", alphanumeric at both ends',
  )
  .describe('Backup name (DNS-1123 label)');

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

const isoTime = z.string().describe('RFC 3339 timestamp');

export const pvbCountsSchema = z.object({
  total: z.number().int(),
  New: z.number().int(),
  InProgress: z.number().int(),
  Completed: z.number().int(),
  Failed: z.number().int(),
  Canceling: z.number().int(),
  Canceled: z.number().int(),
});

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
    uid: z.string(),
    phase: z.string().describe(`One of ${BACKUP_PHASES.join(', ')}`),
    spec: z.unknown().describe('The backup spec as submitted'),
    requestId: z.string().optional(),
    progress: z.object({ totalItems: z.number().int(), itemsBackedUp: z.number().int() }),
    hookStatus: z.object({ hooksAttempted: z.number().int(), hooksFailed: z.number().int() }),
    podVolumeBackups: pvbCountsSchema.describe('PodVolumeBackups by phase'),
    errors: z.number().int(),
    warnings: z.number().int(),
    failureReason: z.string().optional(),
    createdAt: isoTime,
    startedAt: isoTime.optional(),
    completedAt: isoTime.optional(),
    cancelRequestedAt: isoTime.optional(),
    expiration: isoTime.optional().describe('When the backup is deleted (created + spec.ttl); absent when it never expires'),
    backupHooks: z
      .object({ pre: backupHookPhaseSchema.optional(), post: backupHookPhaseSchema.optional() })
      .optional()
      .describe('What the backup-level hooks (spec.hooks.backup) did: pre before the first block, post after every block'),
  })
  .describe('Backup');

export const backupSummarySchema = z.object({
  name: z.string(),
  uid: z.string(),
  phase: z.string(),
  createdAt: isoTime,
  startedAt: isoTime.optional(),
  completedAt: isoTime.optional(),
});

export const backupListSchema = z.object({
  items: z.array(backupSummarySchema),
  nextCursor: z.string().optional().describe('Pass as ?cursor= for the next page; absent on the last page'),
});

const limit = z.coerce.number().int('limit must be a whole number').min(1, 'limit must be at least 1').max(1000, 'limit is at most 1000');
const cursor = z.string().regex(/^\d{1,15}$/, 'cursor must be a value returned as nextCursor');

export const listBackupsQuery = z.object({
  phase: z.enum(BACKUP_PHASES).optional(),
  limit: limit.default(50),
  cursor: cursor.optional(),
});

export const pageQuery = z.object({ limit: limit.default(100), cursor: cursor.optional() });

export const blockPvbSchema = z.object({
  name: z.string(),
  pod: z.string().describe('namespace/name'),
  node: z.string(),
  volume: z.string(),
  phase: z.string(),
  totalBytes: z.number().optional(),
  bytesDone: z.number().optional(),
  message: z.string().optional(),
  startTimestamp: z.string().optional(),
  completionTimestamp: z.string().optional(),
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
        outcome: z.enum(['backed-up', 'planned', 'skipped', 'error']),
        reason: z.string().optional(),
        pvb: z.string().optional().describe('the PVB that backs it up (see podVolumeBackups)'),
        claimName: z.string().optional(),
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
    spec: z
      .record(z.string(), z.unknown())
      .describe(
        'Velero-style backup spec (includedNamespaces, labelSelector, hooks, ...). Beyond Velero: hooks.backup.pre[]/post[] ' +
          '({name, namespace, labelSelector, container, mode: all|one, command, timeout, onError: Continue|Fail, retries}) run once ' +
          'before the first block / after every block; each pod hook exec takes retries {max, backoff}, post hooks executionPolicy ' +
          'Always|OnSuccess|OnFailure, pre hooks onError FailBlock (the whole block is skipped)',
      ),
  })
  .describe('CreateBackupRequest');

export const standardErrors = {
  400: errorResponseSchema,
  401: errorResponseSchema,
  404: errorResponseSchema,
} as const;
