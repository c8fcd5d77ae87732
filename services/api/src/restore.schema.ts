import { RESTORE_PHASES } from '@stowage/core';
import { z } from 'zod';
import { hookRunSchema } from './api.schema.js';

/* Wire schemas of the restore API (OpenAPI and the response serializer). POST bodies are validated by core. */

const isoTime = z.string().describe('RFC 3339 timestamp');

export const restoreNameParam = z
  .string()
  .max(63, 'a restore name is at most 63 characters')
  .regex(
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/,
    'a restore name is a DNS-1123 label: lowercase letters, digits and "-", alphanumeric at both ends',
  )
  .describe('Restore name (DNS-1123 label)');
export const restoreParams = z.object({ name: restoreNameParam });

export const createRestoreBodySchema = z
  .object({
    name: z.string().optional().describe('DNS-1123 label; generated from the backup name when absent'),
    spec: z
      .record(z.string(), z.unknown())
      .describe(
        'Velero-style restore spec: backupName, included/excludedNamespaces, included/excludedResources, includeClusterResources, labelSelector, orLabelSelectors, namespaceMapping, restorePVs, existingResourcePolicy (none|update), preserveNodePorts, hooks.resources[].postHooks[], itemOperationTimeout',
      ),
  })
  .describe('CreateRestoreRequest');

export const pvrCountsSchema = z.object({
  total: z.number().int(),
  New: z.number().int(),
  InProgress: z.number().int(),
  Completed: z.number().int(),
  Failed: z.number().int(),
  Canceling: z.number().int(),
  Canceled: z.number().int(),
  TimedOut: z.number().int(),
});

export const restorePvrSchema = z.object({
  name: z.string(),
  pod: z.string().describe('namespace/name of the restored pod'),
  volume: z.string(),
  snapshotID: z.string(),
  phase: z.string(),
  node: z.string().optional(),
  totalBytes: z.number().optional(),
  bytesDone: z.number().optional(),
  message: z.string().optional(),
  startTimestamp: z.string().optional(),
  completionTimestamp: z.string().optional(),
});

export const restoreTierSchema = z.object({
  index: z.number().int(),
  groupResources: z.array(z.string()),
  items: z.number().int(),
  batches: z.number().int(),
  waitUntil: z.string().nullable(),
});

export const restoreSchema = z
  .object({
    name: z.string(),
    uid: z.string(),
    backupName: z.string(),
    phase: z.string().describe(`One of ${RESTORE_PHASES.join(', ')}`),
    spec: z.unknown().describe('The restore spec with defaults applied'),
    requestId: z.string().optional(),
    progress: z.object({ totalItems: z.number().int(), itemsRestored: z.number().int() }),
    itemResults: z.object({
      created: z.number().int(),
      updated: z.number().int(),
      existsSkipped: z.number().int(),
      failed: z.number().int(),
      notSelected: z.number().int().describe('Items of the backup the filters left out (each logged with its reason)'),
    }),
    hookStatus: z.object({ hooksAttempted: z.number().int(), hooksFailed: z.number().int() }),
    podVolumeRestores: pvrCountsSchema.describe('PodVolumeRestores by phase'),
    tiers: z.array(restoreTierSchema).describe('The creation order: tier k+1 starts when tier k is done'),
    pvrs: z.array(restorePvrSchema),
    hookRuns: z.array(hookRunSchema),
    errors: z.number().int(),
    warnings: z.number().int(),
    failureReason: z.string().optional(),
    createdAt: isoTime,
    startedAt: isoTime.optional(),
    completedAt: isoTime.optional(),
    cancelRequestedAt: isoTime.optional(),
  })
  .describe('Restore');

export const restoreSummarySchema = z.object({
  name: z.string(),
  uid: z.string(),
  backupName: z.string(),
  phase: z.string(),
  createdAt: isoTime,
  startedAt: isoTime.optional(),
  completedAt: isoTime.optional(),
});

export const restoreListSchema = z.object({
  items: z.array(restoreSummarySchema),
  nextCursor: z.string().optional().describe('Pass as ?cursor= for the next page; absent on the last page'),
});

const limit = z.coerce.number().int('limit must be a whole number').min(1, 'limit must be at least 1').max(1000, 'limit is at most 1000');
const cursor = z.string().regex(/^\d{1,15}$/, 'cursor must be a value returned as nextCursor');

export const listRestoresQuery = z.object({
  phase: z.enum(RESTORE_PHASES).optional(),
  limit: limit.default(50),
  cursor: cursor.optional(),
});
export const restoreItemsQuery = z.object({
  outcome: z.enum(['created', 'updated', 'exists-skipped', 'failed']).optional(),
  limit: limit.default(500),
  cursor: cursor.optional(),
});

export const restoreItemSchema = z.object({
  key: z.string().describe('<group-resource>/<namespace or -cluster->/<name> as restored'),
  outcome: z.enum(['created', 'updated', 'exists-skipped', 'failed']),
  reason: z.string().optional(),
  at: isoTime,
});
export const restoreItemListSchema = z.object({
  items: z.array(restoreItemSchema),
  total: z.number().int(),
  nextCursor: z.string().optional(),
});
