/*
 * `stowage backup create --dry-run`: the plan the API answers to POST /v1/backups?dryRun=true,
 * printed for a person (blocks with their pods, hooks and volume decisions, estimates, warnings).
 * The wire shape is core's DryRunPlan (the API's dryRunPlanSchema describes it).
 */
import type { DryRunPlan } from '@stowage/core';
import { formatBytes } from './format.js';

export type { DryRunPlan };

/** Blocks with pods are shown in full; pod-free blocks (config, services, cluster items) as one line each. */
export function formatDryRunPlan(plan: DryRunPlan): string[] {
  const lines: string[] = [`Dry run of backup "${plan.name}": nothing was created, stored or executed.`];
  if (plan.failedValidation) {
    lines.push(`A real run would fail validation: ${plan.failedValidation}`);
    return lines;
  }
  const s = plan.summary;
  lines.push(
    `${s.blocks} ItemBlocks, ${s.items} items, ${s.pods} pods; hooks: ${s.preHooks} pre, ${s.postHooks} post; ` +
      `volumes: ${s.fsBackupVolumes} fs-backup, ${s.skippedVolumes} skipped, ${s.volumeErrors} errors`,
  );
  for (const phase of ['pre', 'post'] as const) {
    for (const hook of plan.backupHooks?.[phase] ?? []) {
      const where = hook.failure
        ? `runs nowhere: ${hook.failure}`
        : `in ${hook.targets.map((t) => `${hook.namespace}/${t.pod}:${t.container}${t.invalid ? ` (cannot run: ${t.invalid})` : ''}`).join(', ')}`;
      lines.push(`backup ${phase} hook ${hook.name}: ${JSON.stringify(hook.command)} onError=${hook.onError} ${where}`);
    }
  }
  for (const block of plan.blocks) {
    if (block.pods.length === 0) {
      const kinds = [...new Set(block.items.map((i) => i.kind || i.key.split('/')[0]))].join(', ');
      lines.push(`block ${block.id}: ${block.items.length} items (${kinds})`);
      continue;
    }
    lines.push('', `block ${block.id}: ${block.items.length} items`);
    for (const pod of block.pods) {
      const key = `${pod.namespace}/${pod.name}`;
      lines.push(`  pod ${key}${pod.node ? ` on ${pod.node}` : ''}`);
      for (const phase of ['pre', 'post'] as const) {
        for (const hook of pod.hooks[phase]) {
          const from = hook.source === 'spec' ? `spec hook ${hook.hookName ?? ''}`.trim() : hook.source;
          lines.push(
            `    ${phase} hook (${from}) in ${hook.container}: ${JSON.stringify(hook.command)} onError=${hook.onError}${hook.invalid ? ` — cannot run: ${hook.invalid}` : ''}`,
          );
        }
      }
      for (const v of block.volumes.filter((vol) => vol.pod === key)) {
        const size =
          v.decision === 'fs-backup'
            ? v.estimatedBytes === null || v.estimatedBytes === undefined
              ? ', size unknown'
              : `, ~${formatBytes(v.estimatedBytes)} (${v.estimateBasis})`
            : '';
        lines.push(
          `    volume ${v.volume}${v.claimName ? ` (PVC ${v.claimName})` : ''}: ${v.decision}${v.snapshot ? ` (${v.snapshot.method}, class ${v.snapshot.className})` : ''}${size}${v.reason ? ` — ${v.reason}` : ''}`,
        );
      }
    }
  }
  lines.push('', `Estimated bytes per node (an estimate: ${plan.estimate.basis})`);
  for (const n of plan.estimate.perNode) {
    lines.push(
      `  ${n.node}: ~${formatBytes(n.estimatedBytes)} in ${n.volumes} volume(s)${n.volumesWithoutEstimate > 0 ? `, ${n.volumesWithoutEstimate} of unknown size` : ''}`,
    );
  }
  if (plan.estimate.perNode.length === 0) lines.push('  no fs-backup volumes');
  lines.push(`  total: ~${formatBytes(plan.estimate.totalBytes)}`);
  for (const w of plan.warnings) lines.push(`warning: ${w}`);
  for (const e of plan.errors) lines.push(`error: ${e}`);
  return lines;
}
