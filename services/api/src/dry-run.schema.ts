import type { DryRunPlan } from '@stowage/core';
import { z } from 'zod';

/*
 * The answer of POST /v1/backups?dryRun=true (core's DryRunPlan): the plan a real backup of
 * this spec would make now, with nothing written or executed. Kept apart from api.schema.ts.
 */

export const dryRunQuery = z.object({
  dryRun: z
    .enum(['true', 'false'])
    .optional()
    .describe('true: validate and plan only; nothing is recorded, queued, stored, created in the cluster or executed'),
});

const hookSchema = z.object({
  container: z.string(),
  command: z.array(z.string()),
  onError: z.enum(['Fail', 'Continue', 'FailBlock']),
  timeoutMs: z.number().int(),
  source: z.string().describe("annotation (the pod's hook annotations) or spec (spec.hooks.resources)"),
  hookName: z.string().optional().describe("The spec hook's name (absent for annotation hooks)"),
  invalid: z.string().optional().describe('Why the hook cannot run; a real run records it as a failed attempt'),
});

const volumeSchema = z.object({
  pod: z.string().describe('namespace/name'),
  volume: z.string(),
  decision: z
    .enum(['fs-backup', 'snapshot', 'skip', 'error'])
    .describe('fs-backup gets a PodVolumeBackup; snapshot a CSI VolumeSnapshot; skip neither; error cannot be backed up'),
  snapshot: z
    .object({ method: z.enum(['kept', 'moved']), className: z.string() })
    .optional()
    .describe('snapshot volumes: the snapshot kept in the cluster or its data moved into the repository, and its VolumeSnapshotClass'),
  reason: z.string().optional(),
  claimName: z.string().optional(),
  node: z.string().optional(),
  estimatedBytes: z.number().nullable().optional().describe('fs-backup volumes: an estimate (see estimateBasis), null when unknown'),
  estimateBasis: z.enum(['pvc-request', 'pvc-capacity', 'pv-capacity', 'emptydir-size-limit', 'unknown']).optional(),
});

const blockSchema = z.object({
  id: z.string(),
  items: z.array(
    z.object({ key: z.string(), apiVersion: z.string(), kind: z.string(), namespace: z.string().optional(), name: z.string() }),
  ),
  pods: z.array(
    z.object({
      namespace: z.string(),
      name: z.string(),
      node: z.string().optional(),
      hooks: z.object({ pre: z.array(hookSchema), post: z.array(hookSchema) }).describe('The hooks that would run, per phase, in order'),
    }),
  ),
  volumes: z.array(volumeSchema).describe("Every pod volume's fs-backup decision with its reason"),
  skips: z.array(z.object({ what: z.string(), reason: z.string() })),
});

const backupHookPreviewSchema = z.object({
  name: z.string(),
  namespace: z.string(),
  command: z.array(z.string()),
  onError: z.enum(['Continue', 'Fail']),
  timeoutMs: z.number().int(),
  targets: z.array(z.object({ pod: z.string(), container: z.string(), invalid: z.string().optional() })),
  failure: z.string().optional().describe('Why it would fail without running anywhere'),
});

export const dryRunPlanSchema = z
  .object({
    name: z.string().describe('The name the backup would have (generated when not given)'),
    dryRun: z.literal(true),
    failedValidation: z.string().optional().describe('Set when a real run would end FailedValidation before planning'),
    summary: z.object({
      blocks: z.number().int(),
      items: z.number().int(),
      pods: z.number().int(),
      preHooks: z.number().int(),
      postHooks: z.number().int(),
      fsBackupVolumes: z.number().int(),
      skippedVolumes: z.number().int(),
      volumeErrors: z.number().int(),
    }),
    estimate: z
      .object({
        isEstimate: z.literal(true),
        basis: z.string().describe('Where the numbers come from'),
        totalBytes: z.number(),
        perNode: z.array(
          z.object({
            node: z.string(),
            volumes: z.number().int(),
            estimatedBytes: z.number(),
            volumesWithoutEstimate: z.number().int(),
          }),
        ),
      })
      .describe('Estimated bytes of the fs-backup volumes per node (provisioned sizes, not measured)'),
    backupHooks: z
      .object({ pre: z.array(backupHookPreviewSchema), post: z.array(backupHookPreviewSchema) })
      .describe('spec.hooks.backup per phase, each with the pods it would run in now (pre: before any block; post: after every block)'),
    blocks: z.array(blockSchema).describe('The ItemBlocks in dispatch order'),
    warnings: z.array(z.string()).describe('What a real run would record as warnings'),
    errors: z.array(z.string()).describe('What a real run would record as errors'),
    notes: z.array(z.string()),
  })
  .describe('Dry-run plan');

// The schema documents core's DryRunPlan: if a field is added to, dropped from or changed in one
// and not the other, this line fails the typecheck.
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
export const schemaIsCoreDryRunPlan: Same<z.infer<typeof dryRunPlanSchema>, DryRunPlan> = true;
