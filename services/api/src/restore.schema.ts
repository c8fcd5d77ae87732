import { PVB_PHASES, RESTORE_PHASES } from '@stowage/core';
import { z } from 'zod';
import { hookRunSchema } from './api.schema.js';
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

/* Wire schemas of the restore API (OpenAPI and the response serializer). POST bodies are validated by core. */

export const restoreNameParam = dns1123NameParam('restore');
export const restoreParams = z.object({ name: restoreNameParam });

export const createRestoreBodySchema = z
  .object({
    name: z.string().optional().describe('DNS-1123 label; generated from the backup name when absent'),
    namespace: z
      .string()
      .optional()
      .describe(
        "A namespaced restore (a Restore in that namespace: needs `create restores` there): it restores only that namespace's backups and items, never cluster-scoped ones; each namespaceMapping target needs the caller's rights to create the restored kinds there. Absent: a cluster-wide restore (`create clusterrestores`).",
      ),
    spec: z
      .record(z.string(), z.unknown())
      .describe(
        'Velero-style restore spec: backupName, included/excludedNamespaces, included/excludedResources, includeClusterResources, labelSelector, orLabelSelectors, namespaceMapping, restorePVs, existingResourcePolicy (none|update), preserveNodePorts, hooks.resources[].postHooks[], itemOperationTimeout. Every list and size is bounded (400 naming the field and the limit): 1000 namespaces or namespaceMapping entries, 500 resources per list, 500 hooks in all, 50 per list, execTimeout up to 30m by default',
      ),
  })
  .describe('CreateRestoreRequest');

export const pvrCountsSchema = phaseCounts([...PVB_PHASES, 'TimedOut']);

export const restorePvrSchema = z.object({
  name: z.string(),
  pod: z.string().describe('namespace/name of the restored pod'),
  volume: z.string(),
  snapshotID: z.string(),
  node: z.string().optional(),
  ...volumeOperationStatus,
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
    ...runScope,
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
    storage: storageCostSchema,
    failureReason: z.string().optional(),
    ...runTimes,
    cancelRequestedAt: isoTime.optional(),
  })
  .describe('Restore');

export const restoreSummarySchema = z.object({
  name: z.string(),
  ...runScope,
  uid: z.string(),
  backupName: z.string(),
  phase: z.string(),
  ...runTimes,
});

export const restoreListSchema = pageOf(restoreSummarySchema);

export const listRestoresQuery = pageQuery(50, { phase: z.enum(RESTORE_PHASES).optional() }, { runs: true });
export const restoreItemsQuery = pageQuery(500, { outcome: z.enum(['created', 'updated', 'exists-skipped', 'failed']).optional() });

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
