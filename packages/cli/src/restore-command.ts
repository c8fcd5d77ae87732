import { parseArgs } from 'node:util';
import { stringify as toYaml } from 'yaml';
import type { StowageApiClient } from './api-client.js';
import type { BackupEvent, Restore, RestoreSummary } from './api-types.js';
import { parseSelector } from './backup-spec.js';
import { CliError, CliErrorCode, ExitCode } from './errors.js';
import { formatDuration, formatTable, msBetween } from './format.js';

export const RESTORE_USAGE = `Restores (the same API and token):
  restore create [NAME] --from-backup BACKUP [-f FILE|-] [--include-namespaces a,b] [--exclude-namespaces a,b]
                 [--include-resources r,s] [--exclude-resources r,s] [--selector k=v,...]
                 [--include-cluster-resources] [--namespace-mappings src:dst,...] [--restore-volumes=false]
                 [--existing-resource-policy none|update] [--preserve-nodeports] [--wait] [--json]
  restore get NAME [--json]           phase, items (created/updated/skipped/failed), PVRs, hooks
  restore describe NAME [--json]      … plus the spec, the tiers, every PVR and hook run, failed items
  restore list [--phase P] [--limit N] [--cursor C] [--json]
  restore wait NAME [--json]          follow a running restore to its end, with progress
  restore logs NAME [--json]          the restore's log lines (every skip with its reason)
  restore cancel NAME [--json]`;

const RESTORE_OPTIONS = {
  file: { type: 'string', short: 'f' },
  'from-backup': { type: 'string' },
  'include-namespaces': { type: 'string' },
  'exclude-namespaces': { type: 'string' },
  'include-resources': { type: 'string' },
  'exclude-resources': { type: 'string' },
  selector: { type: 'string', short: 'l' },
  'include-cluster-resources': { type: 'boolean' },
  'namespace-mappings': { type: 'string' },
  'restore-volumes': { type: 'boolean' },
  'existing-resource-policy': { type: 'string' },
  'preserve-nodeports': { type: 'boolean' },
  wait: { type: 'boolean', short: 'w' },
  json: { type: 'boolean' },
  phase: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const list = (v: string | undefined) =>
  v === undefined
    ? undefined
    : v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0);

/** `src:dst,…` → namespaceMapping (Velero's --namespace-mappings). */
function mappingOf(v: string | undefined): Record<string, string> | undefined {
  if (v === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const pair of list(v) ?? []) {
    const [from, to] = pair.split(':');
    if (!from || !to) throw new CliError(CliErrorCode.usage, `--namespace-mappings: "${pair}" is not source:target`);
    out[from] = to;
  }
  return out;
}

export async function runRestoreCommand(
  argv: readonly string[],
  client: () => StowageApiClient,
  io: { stdout: { write(t: string): void; isTTY?: boolean }; stderr: { write(t: string): void }; readStdin?: () => Promise<string> },
  readSpecFile: (path: string, readStdin?: () => Promise<string>) => Promise<unknown>,
): Promise<number> {
  const [command, ...rest] = argv;
  let parsed: ReturnType<
    typeof parseArgs<{ args: string[]; options: typeof RESTORE_OPTIONS; allowPositionals: true; allowNegative: true; strict: true }>
  >;
  try {
    parsed = parseArgs({ args: [...rest], options: RESTORE_OPTIONS, allowPositionals: true, allowNegative: true, strict: true });
  } catch (err) {
    throw new CliError(CliErrorCode.usage, `${(err as Error).message.split('. To specify')[0]}; try "stowage help"`);
  }
  const { values, positionals } = parsed;
  if (values.help || command === undefined || command === 'help') {
    io.stdout.write(`${RESTORE_USAGE}\n`);
    return command === undefined ? ExitCode.usage : ExitCode.ok;
  }
  const json = values.json === true;
  const out = (text: string) => io.stdout.write(`${text}\n`);
  const printJson = (value: unknown) => out(JSON.stringify(value, null, 2));
  const nameArg = (): string => {
    const name = positionals[0];
    if (!name)
      throw new CliError(CliErrorCode.usage, `restore ${command}: give the restore name, e.g. "stowage restore ${command} shop-back"`);
    if (positionals.length > 1) throw new CliError(CliErrorCode.usage, `restore ${command}: one name only, got ${positionals.join(' ')}`);
    return name;
  };
  switch (command) {
    case 'create': {
      const fromFile = values.file
        ? ((await readSpecFile(values.file, io.readStdin)) as { name?: string; spec?: Record<string, unknown> })
        : {};
      const spec: Record<string, unknown> = { ...(fromFile.spec ?? {}) };
      const set = (key: string, value: unknown) => {
        if (value !== undefined) spec[key] = value;
      };
      set('backupName', values['from-backup']);
      set('includedNamespaces', list(values['include-namespaces']));
      set('excludedNamespaces', list(values['exclude-namespaces']));
      set('includedResources', list(values['include-resources']));
      set('excludedResources', list(values['exclude-resources']));
      set('labelSelector', values.selector === undefined ? undefined : parseSelector(values.selector));
      set('includeClusterResources', values['include-cluster-resources']);
      set('namespaceMapping', mappingOf(values['namespace-mappings']));
      set('restorePVs', values['restore-volumes']);
      set('existingResourcePolicy', values['existing-resource-policy']);
      set('preserveNodePorts', values['preserve-nodeports']);
      if (spec.backupName === undefined) throw new CliError(CliErrorCode.usage, 'restore create: say which backup with --from-backup NAME');
      const name = positionals[0] ?? fromFile.name;
      const created = await client().createRestore({ ...(name ? { name } : {}), spec });
      if (!values.wait) {
        if (json) printJson(created);
        else
          out(
            `restore "${created.name}" submitted from backup "${created.backupName}"; follow it with: stowage restore wait ${created.name}`,
          );
        return ExitCode.ok;
      }
      if (!json) out(`restore "${created.name}" submitted from backup "${created.backupName}"`);
      return await waitAndReport(client(), created.name, json, io);
    }
    case 'wait':
      return await waitAndReport(client(), nameArg(), json, io);
    case 'get': {
      const restore = await client().getRestore(nameArg());
      if (json) printJson(restore);
      else for (const line of formatRestore(restore)) out(line);
      return ExitCode.ok;
    }
    case 'describe': {
      const name = nameArg();
      const [restore, failed] = await Promise.all([
        client().getRestore(name),
        client().restoreItems(name, { outcome: 'failed', limit: 1000 }),
      ]);
      if (json) printJson({ restore, failedItems: failed.items });
      else for (const line of formatRestoreDescribe(restore, failed.items)) out(line);
      return ExitCode.ok;
    }
    case 'list': {
      const limit = values.limit === undefined ? undefined : Number(values.limit);
      if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 1000))
        throw new CliError(CliErrorCode.usage, `--limit must be a whole number from 1 to 1000, got ${JSON.stringify(values.limit)}`);
      const page = await client().listRestores({
        ...(values.phase ? { phase: values.phase } : {}),
        ...(limit ? { limit } : {}),
        ...(values.cursor ? { cursor: values.cursor } : {}),
      });
      if (json) printJson(page);
      else for (const line of formatRestoreList(page.items)) out(line);
      return ExitCode.ok;
    }
    case 'logs': {
      const { formatLogLine } = await import('./cli.js');
      for await (const line of client().logs(nameArg(), 'restores')) out(json ? JSON.stringify(line) : formatLogLine(line));
      return ExitCode.ok;
    }
    case 'cancel': {
      const res = await client().cancelRestore(nameArg());
      if (json) printJson(res);
      else out(`cancel requested for restore "${res.name}" (phase ${res.phase}); objects already created stay`);
      return ExitCode.ok;
    }
    default:
      throw new CliError(CliErrorCode.usage, `unknown restore command ${JSON.stringify(command)}; try "stowage help"`);
  }
}

/** One progress line per event worth a line: tiers, batches (as a running count), PVRs ending, hooks. */
export function restoreProgressLine(ev: BackupEvent, totals: { items: number; done: number }): string | undefined {
  const d = ev.data;
  switch (ev.type) {
    case 'plan.done':
      totals.items = Number(d.totalItems ?? 0);
      return `planned: ${d.totalItems} items in ${d.tiers} tiers, ${d.pods} pods with volumes or hooks, ${d.skipped} not selected`;
    case 'items.batch-done':
      totals.done += Number(d.created ?? 0) + Number(d.updated ?? 0) + Number(d.skipped ?? 0) + Number(d.failed ?? 0);
      return undefined;
    case 'tier.done':
      return `tier ${d.tier} done (${(d.groupResources as string[] | undefined)?.join(', ') ?? ''}): ${totals.done}/${totals.items} items`;
    case 'pvr.phase':
      return ['Completed', 'Failed', 'Canceled'].includes(String(d.to)) ? `volume ${d.pod ?? ''} ${d.volume ?? ''}: ${d.to}` : undefined;
    case 'hook.done':
      return `hook ${d.pod}/${d.container}: ${d.ok ? 'ok' : `failed (exit ${d.exitCode ?? '-'})`}`;
    case 'restore.phase':
      return `phase ${d.to}`;
    default:
      return undefined;
  }
}

async function waitAndReport(
  client: StowageApiClient,
  name: string,
  json: boolean,
  io: { stdout: { write(t: string): void }; stderr: { write(t: string): void } },
): Promise<number> {
  const progress = json ? io.stderr : io.stdout;
  const totals = { items: 0, done: 0 };
  for await (const ev of client.events(name, { resource: 'restores' })) {
    const line = restoreProgressLine(ev, totals);
    if (line) progress.write(`${line}\n`);
  }
  const restore = await client.getRestore(name);
  if (json) io.stdout.write(`${JSON.stringify(restore, null, 2)}\n`);
  else for (const line of formatRestore(restore)) io.stdout.write(`${line}\n`);
  return restore.phase === 'Completed' ? ExitCode.ok : ExitCode.backupNotCompleted;
}

export function formatRestore(r: Restore): string[] {
  const pvr = r.podVolumeRestores;
  const pvrPhases = (['Completed', 'InProgress', 'New', 'Failed', 'Canceling', 'Canceled', 'TimedOut'] as const)
    .filter((p) => pvr[p] > 0)
    .map((p) => `${pvr[p]} ${p}`)
    .join(', ');
  const took = msBetween(r.startedAt ?? r.createdAt, r.completedAt);
  const ir = r.itemResults;
  return [
    `Name:       ${r.name}`,
    `Backup:     ${r.backupName}`,
    `Phase:      ${r.phase}${r.failureReason ? ` (${r.failureReason})` : ''}`,
    `Created:    ${r.createdAt}`,
    `Completed:  ${r.completedAt ?? '-'}${took !== undefined ? ` (took ${formatDuration(took)})` : ''}`,
    `Items:      ${r.progress.itemsRestored}/${r.progress.totalItems} restored (${ir.created} created, ${ir.updated} updated, ${ir.existsSkipped} existed, ${ir.failed} failed; ${ir.notSelected} not selected)`,
    `PVRs:       ${pvr.total}${pvrPhases ? ` (${pvrPhases})` : ''}`,
    `Hooks:      ${r.hookStatus.hooksAttempted} attempted, ${r.hookStatus.hooksFailed} failed`,
    `Errors:     ${r.errors}    Warnings: ${r.warnings}`,
  ];
}

export function formatRestoreDescribe(r: Restore, failedItems: ReadonlyArray<{ key: string; reason?: string }>): string[] {
  const lines = [
    ...formatRestore(r),
    '',
    'Spec:',
    ...toYaml(r.spec ?? {})
      .trimEnd()
      .split('\n')
      .map((l) => `  ${l}`),
  ];
  lines.push('', `Tiers (${r.tiers.length}):`);
  lines.push(
    ...formatTable(
      ['TIER', 'ITEMS', 'BATCHES', 'WAITS FOR', 'RESOURCES'],
      r.tiers.map((t) => [String(t.index), String(t.items), String(t.batches), t.waitUntil ?? '-', t.groupResources.join(',')]),
    ).map((l) => `  ${l}`),
  );
  lines.push('', `Pod volume restores (${r.pvrs.length}):`);
  if (r.pvrs.length > 0)
    lines.push(
      ...formatTable(
        ['POD', 'VOLUME', 'NODE', 'PHASE', 'TOOK'],
        r.pvrs.map((p) => [
          p.pod,
          p.volume,
          p.node ?? '-',
          p.message && p.phase !== 'Completed' ? `${p.phase} (${p.message})` : p.phase,
          formatDuration(msBetween(p.startTimestamp, p.completionTimestamp)),
        ]),
      ).map((l) => `  ${l}`),
    );
  lines.push('', `Hook runs (${r.hookRuns.length}):`);
  if (r.hookRuns.length > 0)
    lines.push(
      ...formatTable(
        ['POD', 'CONTAINER', 'OUTCOME', 'EXIT', 'STARTED'],
        r.hookRuns.map((h) => [
          h.pod,
          h.container,
          h.message && h.outcome !== 'exited' ? `${h.outcome} (${h.message})` : h.outcome,
          h.exitCode === undefined ? '-' : String(h.exitCode),
          h.startedAt ?? '-',
        ]),
      ).map((l) => `  ${l}`),
    );
  if (failedItems.length > 0) {
    lines.push('', `Failed items (${failedItems.length}):`);
    for (const item of failedItems) lines.push(`  ${item.key}: ${item.reason ?? 'no reason'}`);
  }
  return lines;
}

export function formatRestoreList(items: readonly RestoreSummary[]): string[] {
  if (items.length === 0) return ['no restores'];
  return formatTable(
    ['NAME', 'BACKUP', 'PHASE', 'CREATED', 'TOOK'],
    items.map((r) => [r.name, r.backupName, r.phase, r.createdAt, formatDuration(msBetween(r.startedAt ?? r.createdAt, r.completedAt))]),
  );
}
