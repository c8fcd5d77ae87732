import { stringify as toYaml } from 'yaml';
import type { StowageApiClient } from './api-client.js';
import type { BackupEvent, Restore, RestoreSummary } from './api-types.js';
import { csv, type OutputFormat, oneName, outputFormatOf, pageLimitOf, parseVerb, printAs, serialise } from './args.js';
import { ageOf, formatLogLine, specFlagsOf } from './backup-commands.js';
import { readSpecFile, SELECTION_FLAGS, SELECTION_OPTIONS, selectionSpec } from './backup-spec.js';
import { type CliIo, confirm } from './cli-io.js';
import { CliError, CliErrorCode, ExitCode } from './errors.js';
import { formatDuration, formatLocalTime, formatStorageCost, formatTable, formatTime, msBetween } from './format.js';

export const RESTORE_USAGE = `Restores (the same API and token):
  restore create [NAME] --from-backup BACKUP | --from-schedule SCHEDULE [-f FILE|-]
                 [--include-namespaces a,b] [--exclude-namespaces a,b]
                 [--include-resources r,s] [--exclude-resources r,s] [--selector k=v,...]
                 [--include-cluster-resources] [--namespace-mappings src:dst,...] [--restore-volumes=false]
                 [--existing-resource-policy none|update] [--preserve-nodeports] [--wait] [-o ...]
                 --from-schedule: the schedule's newest Completed backup
  restore get [NAME ...] [-o json|yaml|table]   one row per restore (all without a name)
  restore describe NAME [-o ...]      phase, items, the spec, the tiers, every PVR and hook run, failed items
  restore list [--phase P] [--limit N] [--cursor C] [-o ...]
  restore wait NAME [-o ...]          follow a running restore to its end, with progress
  restore logs NAME [--json]          the restore's log lines (every skip with its reason)
  restore cancel NAME
  restore delete NAME ... | --all [--confirm]   its record, log and results (restored objects stay)`;

const OPTIONS = {
  file: { type: 'string', short: 'f' },
  'from-backup': { type: 'string' },
  'from-schedule': { type: 'string' },
  ...SELECTION_OPTIONS,
  'namespace-mappings': { type: 'string' },
  'restore-volumes': { type: 'boolean' },
  'existing-resource-policy': { type: 'string' },
  'preserve-nodeports': { type: 'boolean' },
  wait: { type: 'boolean', short: 'w' },
  phase: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  all: { type: 'boolean' },
  confirm: { type: 'boolean' },
} as const;

const ALLOWED: Record<string, readonly string[]> = {
  create: [
    'file',
    'from-backup',
    'from-schedule',
    ...SELECTION_FLAGS,
    'namespace-mappings',
    'restore-volumes',
    'existing-resource-policy',
    'preserve-nodeports',
    'wait',
  ],
  get: [],
  describe: [],
  list: ['phase', 'limit', 'cursor'],
  wait: [],
  logs: [],
  cancel: [],
  delete: ['all', 'confirm'],
};

/** `src:dst,…` → namespaceMapping (Velero's --namespace-mappings). */
function mappingOf(v: string | undefined): Record<string, string> | undefined {
  if (v === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const pair of csv(v)) {
    const [from, to, ...more] = pair.split(':');
    if (!from || !to || more.length > 0)
      throw new CliError(CliErrorCode.usage, `restore create: flag --namespace-mappings: "${pair}" is not source:target`);
    out[from] = to;
  }
  return out;
}

export async function runRestoreCommand(argv: readonly string[], client: () => StowageApiClient, io: CliIo): Promise<number> {
  const verb = parseVerb(argv, { group: 'restore', usage: RESTORE_USAGE, options: OPTIONS, allowed: ALLOWED }, io.stdout);
  if ('exitCode' in verb) return verb.exitCode;
  const { command, what, values, positionals } = verb;
  const format = command === 'logs' ? 'table' : outputFormatOf(values, what);
  const out = (text: string) => io.stdout.write(`${text}\n`);
  const name = () => oneName(positionals, what, 'shop-back');
  switch (command) {
    case 'create': {
      if (positionals.length > 1) throw new CliError(CliErrorCode.usage, `${what}: one name only, got ${positionals.join(' ')}`);
      const fromFile = values.file
        ? ((await readSpecFile(values.file, io.readStdin)) as { name?: string; spec?: Record<string, unknown> })
        : {};
      const spec: Record<string, unknown> = { ...(fromFile.spec ?? {}) };
      const set = (key: string, value: unknown) => {
        if (value !== undefined) spec[key] = value;
      };
      if (values['from-backup'] !== undefined && values['from-schedule'] !== undefined)
        throw new CliError(CliErrorCode.usage, `${what}: give --from-backup or --from-schedule, not both`);
      set('backupName', values['from-backup']);
      if (values['from-schedule'] !== undefined) set('backupName', await newestBackupOf(client(), values['from-schedule']));
      Object.assign(spec, selectionSpec(specFlagsOf(values)));
      set('namespaceMapping', mappingOf(values['namespace-mappings']));
      set('restorePVs', values['restore-volumes']);
      set('existingResourcePolicy', values['existing-resource-policy']);
      set('preserveNodePorts', values['preserve-nodeports']);
      if (spec.backupName === undefined)
        throw new CliError(CliErrorCode.usage, `${what}: say which backup with --from-backup NAME (or --from-schedule NAME)`);
      const restoreName = positionals[0] ?? fromFile.name;
      const created = await client().createRestore({ ...(restoreName ? { name: restoreName } : {}), spec });
      if (!values.wait) {
        printAs(
          format,
          created,
          () => [
            `restore "${created.name}" submitted from backup "${created.backupName}"; follow it with: stowage restore wait ${created.name}`,
          ],
          out,
        );
        return ExitCode.ok;
      }
      if (format === 'table') out(`restore "${created.name}" submitted from backup "${created.backupName}"; waiting for it to end`);
      return await waitAndReport(client(), created.name, io, format);
    }
    case 'wait':
      return await waitAndReport(client(), name(), io, format);
    case 'get': {
      if (positionals.length === 0) {
        const items = await client().allRestores();
        printAs(format, { items }, () => formatRestoreList(items), out);
        return ExitCode.ok;
      }
      const restores = await Promise.all(positionals.map((n) => client().getRestore(n)));
      printAs(format, restores.length === 1 ? restores[0] : { items: restores }, () => formatRestoreGetTable(restores), out);
      return ExitCode.ok;
    }
    case 'describe': {
      const n = name();
      const [restore, failed] = await Promise.all([client().getRestore(n), client().restoreItems(n, { outcome: 'failed', limit: 1000 })]);
      printAs(format, { restore, failedItems: failed.items }, () => formatRestoreDescribe(restore, failed.items), out);
      return ExitCode.ok;
    }
    case 'list': {
      if (positionals.length > 0) throw new CliError(CliErrorCode.usage, `${what} takes no name; use --phase to filter`);
      const limit = pageLimitOf(values.limit, what);
      const page = await client().listRestores({
        ...(values.phase ? { phase: values.phase } : {}),
        ...(limit ? { limit } : {}),
        ...(values.cursor ? { cursor: values.cursor } : {}),
      });
      printAs(format, page, () => formatRestoreList(page.items), out);
      return ExitCode.ok;
    }
    case 'logs': {
      const json = values.json === true || values.output === 'json';
      for await (const line of client().logs(name(), 'restores')) out(json ? JSON.stringify(line) : formatLogLine(line));
      return ExitCode.ok;
    }
    case 'cancel': {
      const res = await client().cancelRestore(name());
      printAs(format, res, () => [`cancel requested for restore "${res.name}" (phase ${res.phase}); objects already created stay`], out);
      return ExitCode.ok;
    }
    case 'delete': {
      if (positionals.length > 0 === (values.all === true))
        throw new CliError(CliErrorCode.usage, `${what}: give restore names or --all (one of them)`);
      const names = values.all ? (await client().allRestores()).map((r) => r.name) : positionals;
      if (names.length === 0) {
        out('no restores to delete');
        return ExitCode.ok;
      }
      const question = `delete ${names.length === 1 ? `restore "${names[0]}"` : `${names.length} restores (${names.join(', ')})`} (the restored objects stay)`;
      if (!(await confirm(io, values.confirm === true, what, question))) {
        out('nothing deleted');
        return ExitCode.ok;
      }
      const results = [];
      for (const n of names) {
        const res = await client().deleteRestore(n);
        results.push(res);
        if (format === 'table') out(`restore "${res.name}" deleted (its record, log and results; the restored objects stay)`);
      }
      if (format !== 'table') out(serialise(format, results.length === 1 ? results[0] : { items: results }));
      return ExitCode.ok;
    }
    default:
      throw new CliError(CliErrorCode.usage, `unknown restore command ${JSON.stringify(command)}`);
  }
}

/** Velero's `restore create --from-schedule`: the schedule's newest Completed backup. */
async function newestBackupOf(client: StowageApiClient, schedule: string): Promise<string> {
  const s = await client.getSchedule(schedule);
  const name = s.status.lastSuccessfulBackup?.name;
  if (!name) throw new CliError(CliErrorCode.notFound, `schedule "${schedule}" has no Completed backup to restore from yet`);
  return name;
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
      // A PVR that failed or was canceled says why (its status message), so the line alone explains it.
      return ['Completed', 'Failed', 'Canceled'].includes(String(d.to))
        ? `volume ${d.pod ?? ''} ${d.volume ?? ''}: ${d.to}${typeof d.message === 'string' && d.message ? ` (${d.message})` : ''}`
        : undefined;
    case 'hook.done':
      return `hook ${d.pod}/${d.container}: ${d.ok ? 'ok' : `failed (exit ${d.exitCode ?? '-'})`}`;
    case 'restore.phase':
      return `phase ${d.to}`;
    default:
      return undefined;
  }
}

async function waitAndReport(client: StowageApiClient, name: string, io: CliIo, format: OutputFormat): Promise<number> {
  const progress = format === 'table' ? io.stdout : io.stderr;
  const totals = { items: 0, done: 0 };
  for await (const ev of client.events(name, { resource: 'restores' })) {
    const line = restoreProgressLine(ev, totals);
    if (line) progress.write(`${line}\n`);
  }
  const restore = await client.getRestore(name);
  printAs(
    format,
    restore,
    () => formatRestore(restore),
    (l) => io.stdout.write(`${l}\n`),
  );
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
    `Created:    ${formatTime(r.createdAt)}`,
    `Completed:  ${formatTime(r.completedAt)}${took !== undefined ? ` (took ${formatDuration(took)})` : ''}`,
    `Items:      ${r.progress.itemsRestored}/${r.progress.totalItems} restored (${ir.created} created, ${ir.updated} updated, ${ir.existsSkipped} existed, ${ir.failed} failed; ${ir.notSelected} not selected)`,
    `PVRs:       ${pvr.total}${pvrPhases ? ` (${pvrPhases})` : ''}`,
    `Hooks:      ${r.hookStatus.hooksAttempted} attempted, ${r.hookStatus.hooksFailed} failed`,
    `Errors:     ${r.errors}    Warnings: ${r.warnings}`,
    `Storage:    ${formatStorageCost(r.storage)}`,
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
          formatLocalTime(h.startedAt),
        ]),
      ).map((l) => `  ${l}`),
    );
  if (failedItems.length > 0) {
    lines.push('', `Failed items (${failedItems.length}):`);
    for (const item of failedItems) lines.push(`  ${item.key}: ${item.reason ?? 'no reason'}`);
  }
  return lines;
}

export function formatRestoreList(items: readonly RestoreSummary[], now = Date.now()): string[] {
  if (items.length === 0) return ['no restores'];
  return formatTable(
    ['NAME', 'BACKUP', 'STATUS', 'CREATED', 'AGE', 'TOOK'],
    items.map((r) => [
      r.name,
      r.backupName,
      r.phase,
      formatLocalTime(r.createdAt),
      ageOf(r.createdAt, now),
      formatDuration(msBetween(r.startedAt ?? r.createdAt, r.completedAt)),
    ]),
  );
}

/** `restore get NAME…`: one row per restore with its counts. */
export function formatRestoreGetTable(restores: readonly Restore[], now = Date.now()): string[] {
  return formatTable(
    ['NAME', 'BACKUP', 'STATUS', 'ERRORS', 'WARNINGS', 'CREATED', 'AGE'],
    restores.map((r) => [
      r.name,
      r.backupName,
      r.phase,
      String(r.errors),
      String(r.warnings),
      formatLocalTime(r.createdAt),
      ageOf(r.createdAt, now),
    ]),
  );
}
