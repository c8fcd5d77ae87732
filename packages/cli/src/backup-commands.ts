import { createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { type LabelSelector, matchesLabelSelector } from '@stowage/core/label-selector';
import { stringify as toYaml } from 'yaml';
import type { StowageApiClient } from './api-client.js';
import type { Backup, BackupSummary, Block } from './api-types.js';
import { keyValues, oneName, outputFormatOf, pageLimitOf, parseVerb, printAs, serialise } from './args.js';
import { buildBackupReport } from './backup-report.js';
import { type BackupSpecFlags, mergeRequest, parseSelector, readSpecFile, SELECTION_FLAGS, SELECTION_OPTIONS } from './backup-spec.js';
import type { CliIo } from './cli-io.js';
import { confirm } from './cli-io.js';
import { formatDryRunPlan } from './dry-run-plan.js';
import { CliError, CliErrorCode, ExitCode } from './errors.js';
import { followBackup } from './follow.js';
import {
  formatAge,
  formatBytes,
  formatDuration,
  formatLocalTime,
  formatStorageCost,
  formatTable,
  formatTime,
  msBetween,
} from './format.js';

export const BACKUP_USAGE = `Backups (the API at STOWAGE_API_URL, token in STOWAGE_API_TOKEN):
  backup create [NAME] [-f FILE|-] [--include-namespaces a,b] [--exclude-namespaces a,b]
                [--include-resources r,s] [--exclude-resources r,s] [--selector k=v,...]
                [--include-cluster-resources] [--default-volumes-to-fs-backup]
                [--fs-backup-timeout 1h] [--ttl 720h] [--labels k=v,...] [--annotations k=v,...]
                [--wait] [--dry-run] [-o json|yaml|table]
  backup create --from-schedule SCHEDULE [--wait]   a backup from the schedule's template, now
                --dry-run: validate and show the plan (blocks, hooks, volume decisions,
                estimated bytes per node, warnings); nothing is created or run
  backup get [NAME ...] [--selector k=v] [-o json|yaml|table]   one row per backup (all without a name)
  backup describe NAME [--details] [-o json|yaml|table]   the spec, blocks, PVBs, hook runs;
                --details adds the resource list by kind
  backup list [--phase P] [--selector k=v] [--limit N] [--cursor C] [-o json|yaml|table]
  backup wait NAME [-o ...]           follow a running backup to its end, with progress
  backup logs NAME [--json]           the backup's log lines (--json: NDJSON as stored)
  backup download NAME [-o FILE] [--force]   the resources tarball (default NAME-data.tar.gz)
  backup cancel NAME
  backup delete NAME ... | --all | --selector k=v  [--confirm]
                its record, jobs, PVBs and stored data (a running one is canceled first);
                asks first on a terminal, needs --confirm otherwise`;

const OPTIONS = {
  file: { type: 'string', short: 'f' },
  name: { type: 'string' },
  ...SELECTION_OPTIONS,
  'default-volumes-to-fs-backup': { type: 'boolean' },
  'fs-backup-timeout': { type: 'string' },
  ttl: { type: 'string' },
  labels: { type: 'string' },
  annotations: { type: 'string' },
  'from-schedule': { type: 'string' },
  wait: { type: 'boolean', short: 'w' },
  'dry-run': { type: 'boolean' },
  details: { type: 'boolean' },
  phase: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  all: { type: 'boolean' },
  confirm: { type: 'boolean' },
  force: { type: 'boolean' },
} as const;

/** The spec-shaping flags shared with `schedule create`. */
export const SPEC_FLAGS = [...SELECTION_FLAGS, 'default-volumes-to-fs-backup', 'fs-backup-timeout', 'ttl'] as const;

const ALLOWED: Record<string, readonly string[]> = {
  create: ['file', 'name', ...SPEC_FLAGS, 'labels', 'annotations', 'from-schedule', 'wait', 'dry-run'],
  get: ['selector'],
  list: ['phase', 'limit', 'cursor', 'selector'],
  describe: ['details'],
  wait: [],
  logs: [],
  download: ['force'],
  cancel: [],
  delete: ['all', 'selector', 'confirm'],
};

export function specFlagsOf(values: Record<string, string | boolean | undefined>): BackupSpecFlags {
  const s = (k: string) => values[k] as string | undefined;
  const b = (k: string) => values[k] as boolean | undefined;
  return {
    includeNamespaces: s('include-namespaces'),
    excludeNamespaces: s('exclude-namespaces'),
    includeResources: s('include-resources'),
    excludeResources: s('exclude-resources'),
    selector: s('selector'),
    includeClusterResources: b('include-cluster-resources'),
    defaultVolumesToFsBackup: b('default-volumes-to-fs-backup'),
    fsBackupTimeout: s('fs-backup-timeout'),
    ttl: s('ttl'),
  };
}

export async function runBackupCommand(argv: readonly string[], client: () => StowageApiClient, io: CliIo): Promise<number> {
  const verb = parseVerb(argv, { group: 'backup', usage: BACKUP_USAGE, options: OPTIONS, allowed: ALLOWED }, io.stdout);
  if ('exitCode' in verb) return verb.exitCode;
  const { command, what, values, positionals } = verb;
  const out = (text: string) => io.stdout.write(`${text}\n`);
  // `backup download -o FILE` (Velero's flag): a path there, an output format everywhere else.
  const format = command === 'download' || command === 'logs' ? 'table' : outputFormatOf(values, what);
  const name = () => oneName(positionals, what, 'nightly');

  switch (command) {
    case 'create': {
      if (positionals.length > 1) throw new CliError(CliErrorCode.usage, `${what}: one name only, got ${positionals.join(' ')}`);
      if (values['from-schedule'] !== undefined) return await createFromSchedule(values, positionals, client(), io, format);
      if (positionals[0] && values.name && positionals[0] !== values.name)
        throw new CliError(CliErrorCode.usage, `${what}: the name is given twice (argument and --name) with different values`);
      const fromFile = values.file ? await readSpecFile(values.file, io.readStdin) : undefined;
      const request = mergeRequest(fromFile, { ...specFlagsOf(values), name: values.name ?? positionals[0] });
      if (values.labels !== undefined) request.labels = { ...request.labels, ...keyValues('labels', values.labels) };
      if (values.annotations !== undefined)
        request.annotations = { ...request.annotations, ...keyValues('annotations', values.annotations) };
      if (values['dry-run']) {
        if (values.wait)
          throw new CliError(CliErrorCode.usage, `${what}: --dry-run and --wait do not go together (a dry run runs nothing)`);
        const plan = await client().planBackup(request);
        printAs(format, plan, () => formatDryRunPlan(plan), out);
        return ExitCode.ok;
      }
      const created = await client().createBackup(request);
      return await afterCreate(client(), created.name, created, values.wait === true, io, format);
    }
    case 'wait':
      return await waitAndReport(client(), name(), io, format);
    case 'get': {
      const selector = values.selector === undefined ? undefined : parseSelector(values.selector);
      if (positionals.length === 0) {
        const items = filterBySelector(await client().allBackups(), selector);
        printAs(format, { items }, () => formatList(items), out);
        return ExitCode.ok;
      }
      if (selector) throw new CliError(CliErrorCode.usage, `${what}: give names or --selector, not both`);
      const backups = await Promise.all(positionals.map((n) => client().getBackup(n)));
      printAs(format, backups.length === 1 ? backups[0] : { items: backups }, () => formatGetTable(backups), out);
      return ExitCode.ok;
    }
    case 'describe': {
      const n = name();
      const [backup, blocks] = await Promise.all([client().getBackup(n), client().allBlocks(n)]);
      const resources = values.details ? (await client().backupResources(n)).resources : undefined;
      const value = { backup, blocks, report: buildBackupReport(backup, blocks), ...(resources ? { resources } : {}) };
      printAs(format, value, () => [...formatDescribe(backup, blocks), ...(resources ? formatResourceList(resources) : [])], out);
      return ExitCode.ok;
    }
    case 'list': {
      if (positionals.length > 0) throw new CliError(CliErrorCode.usage, `${what} takes no name; use --phase or --selector to filter`);
      const limit = pageLimitOf(values.limit, what);
      const page = await client().listBackups({
        ...(values.phase ? { phase: values.phase } : {}),
        ...(limit ? { limit } : {}),
        ...(values.cursor ? { cursor: values.cursor } : {}),
      });
      const items = filterBySelector(page.items, values.selector === undefined ? undefined : parseSelector(values.selector));
      printAs(format, { ...page, items }, () => formatList(items), out);
      if (format === 'table' && page.nextCursor) io.stderr.write(`more backups: stowage backup list --cursor ${page.nextCursor}\n`);
      return ExitCode.ok;
    }
    case 'logs': {
      for await (const line of client().logs(name()))
        out(values.json || values.output === 'json' ? JSON.stringify(line) : formatLogLine(line));
      return ExitCode.ok;
    }
    case 'download':
      return await download(client(), name(), values.output, values.force === true, io);
    case 'cancel': {
      const res = await client().cancelBackup(name());
      printAs(
        format,
        res,
        () => [`cancel requested for backup "${res.name}" (phase ${res.phase}); it ends Canceled once its running work has stopped`],
        out,
      );
      return ExitCode.ok;
    }
    case 'delete':
      return await deleteBackups(values, positionals, client(), io, format);
    default:
      throw new CliError(CliErrorCode.usage, `unknown backup command ${JSON.stringify(command)}`);
  }
}

async function createFromSchedule(
  values: Record<string, string | boolean | undefined>,
  positionals: readonly string[],
  client: StowageApiClient,
  io: CliIo,
  format: ReturnType<typeof outputFormatOf>,
): Promise<number> {
  const extra = Object.keys(values).filter((f) => values[f] !== undefined && !['from-schedule', 'wait', 'output', 'json'].includes(f));
  if (positionals.length > 0 || extra.length > 0)
    throw new CliError(
      CliErrorCode.usage,
      `backup create --from-schedule takes the schedule's template as it is: no ${positionals.length > 0 ? 'NAME (the backup is named <schedule>-<yyyyMMddHHmmss>)' : extra.map((f) => `--${f}`).join(', ')}`,
    );
  const created = await client.backupFromSchedule(values['from-schedule'] as string);
  return await afterCreate(client, created.name, created, values.wait === true, io, format);
}

async function afterCreate(
  client: StowageApiClient,
  name: string,
  created: unknown,
  wait: boolean,
  io: CliIo,
  format: ReturnType<typeof outputFormatOf>,
): Promise<number> {
  const out = (text: string) => io.stdout.write(`${text}\n`);
  if (!wait) {
    printAs(format, created, () => [`backup "${name}" submitted; follow it with: stowage backup wait ${name}`], out);
    return ExitCode.ok;
  }
  if (format === 'table') out(`backup "${name}" submitted; waiting for it to end (Ctrl-C stops waiting, not the backup)`);
  return await waitAndReport(client, name, io, format);
}

async function waitAndReport(
  client: StowageApiClient,
  name: string,
  io: CliIo,
  format: ReturnType<typeof outputFormatOf>,
): Promise<number> {
  // Progress goes to stderr when stdout is machine-readable.
  const progressStream = format === 'table' ? io.stdout : io.stderr;
  const { backup, blocks } = await followBackup(client, name, {
    output: { isTTY: progressStream.isTTY === true, write: (t) => progressStream.write(t) },
  });
  printAs(
    format,
    { backup, report: buildBackupReport(backup, blocks) },
    () => formatBackup(backup),
    (l) => io.stdout.write(`${l}\n`),
  );
  return backup.phase === 'Completed' ? ExitCode.ok : ExitCode.backupNotCompleted;
}

function filterBySelector(items: BackupSummary[], selector: LabelSelector | undefined): BackupSummary[] {
  return selector ? items.filter((b) => matchesLabelSelector(selector, b.labels ?? {})) : items;
}

async function deleteBackups(
  values: Record<string, string | boolean | undefined>,
  positionals: readonly string[],
  client: StowageApiClient,
  io: CliIo,
  format: ReturnType<typeof outputFormatOf>,
): Promise<number> {
  const ways = [positionals.length > 0, values.all === true, values.selector !== undefined].filter(Boolean).length;
  if (ways !== 1) throw new CliError(CliErrorCode.usage, 'backup delete: give backup names, --all, or --selector (one of them)');
  const names =
    positionals.length > 0
      ? [...positionals]
      : filterBySelector(
          await client.allBackups(),
          values.selector === undefined ? undefined : parseSelector(values.selector as string),
        ).map((b) => b.name);
  if (names.length === 0) {
    io.stdout.write('no backups to delete\n');
    return ExitCode.ok;
  }
  const question = `delete ${names.length === 1 ? `backup "${names[0]}"` : `${names.length} backups (${names.join(', ')})`} with its data in storage`;
  if (!(await confirm(io, values.confirm === true, 'backup delete', question))) {
    io.stdout.write('nothing deleted\n');
    return ExitCode.ok;
  }
  const results = [];
  for (const n of names) {
    const res = await client.deleteBackup(n);
    results.push(res);
    if (format === 'table')
      io.stdout.write(
        'deleted' in res
          ? `backup "${res.name}" deleted (record, jobs, PodVolumeBackups and stored data)\n`
          : `backup "${res.name}" is ${res.phase}: it is being canceled and will be deleted once it has stopped\n`,
      );
  }
  if (format !== 'table') io.stdout.write(`${serialise(format, results.length === 1 ? results[0] : { items: results })}\n`);
  return ExitCode.ok;
}

/** Streams the tarball to FILE (default `<name>-data.tar.gz`, Velero's); an existing file stays unless --force. */
async function download(client: StowageApiClient, name: string, path: string | undefined, force: boolean, io: CliIo): Promise<number> {
  const target = path ?? `${name}-data.tar.gz`;
  if (!force && (await stat(target).catch(() => undefined)))
    throw new CliError(CliErrorCode.usage, `backup download: ${target} exists; add --force to overwrite it`);
  const body = await client.downloadBackup(name);
  const partial = `${target}.partial-${process.pid}`;
  try {
    await pipeline(body, createWriteStream(partial, { flags: 'wx', mode: 0o600 }));
    await rename(partial, target);
  } catch (err) {
    await rm(partial, { force: true });
    if (err instanceof CliError) throw err;
    throw new CliError(CliErrorCode.apiFailed, `backup download: writing ${target} failed: ${(err as Error).message}`, [], { cause: err });
  }
  const size = (await stat(target)).size;
  io.stdout.write(`backup "${name}" downloaded to ${target} (${formatBytes(size)})\n`);
  return ExitCode.ok;
}

/** `app=shop,tier=db` (or `<none>`), as kubectl shows labels. */
export function formatLabels(labels: Record<string, string> | undefined): string {
  const entries = Object.entries(labels ?? {});
  return entries.length === 0 ? '<none>' : entries.map(([k, v]) => `${k}=${v}`).join(',');
}

export function formatBackup(b: Backup, now = Date.now()): string[] {
  const pvb = b.podVolumeBackups;
  const pvbPhases = (['Completed', 'InProgress', 'New', 'Failed', 'Canceling', 'Canceled'] as const)
    .filter((p) => pvb[p] > 0)
    .map((p) => `${pvb[p]} ${p}`)
    .join(', ');
  const took = msBetween(b.startedAt ?? b.createdAt, b.completedAt);
  return [
    `Name:         ${b.name}`,
    `Phase:        ${b.phase}${b.failureReason ? ` (${b.failureReason})` : ''}`,
    `Labels:       ${formatLabels(b.labels)}`,
    ...(b.annotations && Object.keys(b.annotations).length > 0 ? [`Annotations:  ${formatLabels(b.annotations)}`] : []),
    `Created:      ${formatTime(b.createdAt, now)}`,
    `Started:      ${formatTime(b.startedAt, now)}`,
    `Completed:    ${formatTime(b.completedAt, now)}${took !== undefined ? ` (took ${formatDuration(took)})` : ''}`,
    ...(b.cancelRequestedAt ? [`Cancel:       requested at ${formatTime(b.cancelRequestedAt, now)}`] : []),
    ...(b.expiration ? [`Expires:      ${formatTime(b.expiration, now)}`] : []),
    `Items:        ${b.progress.itemsBackedUp}/${b.progress.totalItems} backed up`,
    `Hooks:        ${b.hookStatus.hooksAttempted} attempted, ${b.hookStatus.hooksFailed} failed`,
    `PVBs:         ${pvb.total}${pvbPhases ? ` (${pvbPhases})` : ''}`,
    `Errors:       ${b.errors}    Warnings: ${b.warnings}`,
    `Storage:      ${formatStorageCost(b.storage)}`,
  ];
}

export function formatDescribe(b: Backup, blocks: readonly Block[]): string[] {
  const lines = [...formatBackup(b), '', 'Spec:'];
  const spec = toYaml(compact(b.spec) ?? {}).trimEnd();
  lines.push(...spec.split('\n').map((l) => `  ${l}`));
  lines.push('', `Blocks (${blocks.length}):`);
  lines.push(
    ...formatTable(
      ['BLOCK', 'STATE', 'ITEMS', 'PVBS', 'HOOKS', 'PODS'],
      blocks.map((blk) => [
        blk.id,
        blk.skipped !== undefined ? `${blk.state} (skipped)` : blk.state,
        blk.itemsWritten !== undefined ? `${blk.itemsWritten}/${blk.itemCount}` : String(blk.itemCount),
        String(blk.podVolumeBackups.length),
        String(blk.hookRuns.length),
        blk.pods.length > 0 ? blk.pods.join(',') : '-',
      ]),
    ).map((l) => `  ${l}`),
  );
  const skipped = blocks.filter((blk) => blk.skipped !== undefined);
  if (skipped.length > 0) {
    lines.push('', `Skipped blocks (${skipped.length}):`);
    for (const blk of skipped) lines.push(`  ${blk.id}: ${blk.skipped}`);
  }
  const backupHooks = (['pre', 'post'] as const).flatMap((phase) => {
    const done = b.backupHooks?.[phase];
    return done ? [`  ${phase}: ${done.hooksRun} run, ${done.hooksFailed} failed${done.failed ? ` (${done.failed})` : ''}`] : [];
  });
  if (backupHooks.length > 0) lines.push('', 'Backup hooks:', ...backupHooks);
  const pvbs = blocks.flatMap((blk) => blk.podVolumeBackups.map((p) => ({ blk, p })));
  lines.push('', `Pod volume backups (${pvbs.length}):`);
  if (pvbs.length > 0)
    lines.push(
      ...formatTable(
        ['BLOCK', 'POD', 'VOLUME', 'NODE', 'PHASE', 'BYTES', 'TOOK'],
        pvbs.map(({ blk, p }) => [
          blk.id,
          p.pod,
          p.volume,
          p.node,
          p.message && p.phase !== 'Completed' ? `${p.phase} (${p.message})` : p.phase,
          p.totalBytes !== undefined
            ? `${formatBytes(p.phase === 'Completed' ? p.totalBytes : (p.bytesDone ?? 0))}/${formatBytes(p.totalBytes)}`
            : formatBytes(p.bytesDone),
          formatDuration(msBetween(p.startTimestamp, p.completionTimestamp)),
        ]),
      ).map((l) => `  ${l}`),
    );
  // Every run in order: the backup pre hooks, each block's, then the backup post hooks.
  const backupRuns = (phase: 'pre' | 'post') => (b.backupHooks?.[phase]?.runs ?? []).map((r) => ({ blk: { id: '(backup)' }, r }));
  const runs = [...backupRuns('pre'), ...blocks.flatMap((blk) => blk.hookRuns.map((r) => ({ blk, r }))), ...backupRuns('post')];
  lines.push('', `Hook runs (${runs.length}):`);
  if (runs.length > 0)
    lines.push(
      ...formatTable(
        ['BLOCK', 'HOOK', 'POD', 'CONTAINER', 'PHASE', 'OUTCOME', 'EXIT', 'TRY', 'TOOK', 'STARTED'],
        runs.map(({ blk, r }) => [
          blk.id,
          r.hookName || r.source,
          r.pod,
          r.container,
          r.phase,
          r.message && r.outcome !== 'exited' ? `${r.outcome} (${r.message})` : r.outcome,
          r.exitCode === undefined ? '-' : String(r.exitCode),
          r.try !== undefined && r.tries !== undefined ? `${r.try}/${r.tries}` : '-',
          formatDuration(msBetween(r.startedAt, r.endedAt)),
          formatLocalTime(r.startedAt),
        ]),
      ).map((l) => `  ${l}`),
    );
  return lines;
}

/** Velero's `Resource List:` of `backup describe --details`: each kind, then its items. */
export function formatResourceList(resources: Record<string, readonly string[]>): string[] {
  const kinds = Object.keys(resources).sort();
  const lines = ['', 'Resource List:'];
  if (kinds.length === 0) lines.push('  <none>');
  for (const kind of kinds) lines.push(`  ${kind}:`, ...(resources[kind] ?? []).map((item) => `    - ${item}`));
  return lines;
}

/** `backup get NAME…`: one row per backup, with its counts (Velero's columns). */
export function formatGetTable(backups: readonly Backup[], now = Date.now()): string[] {
  return formatTable(
    ['NAME', 'STATUS', 'ERRORS', 'WARNINGS', 'CREATED', 'AGE', 'EXPIRES', 'LABELS'],
    backups.map((b) => [
      b.name,
      b.phase,
      String(b.errors),
      String(b.warnings),
      formatLocalTime(b.createdAt),
      ageOf(b.createdAt, now),
      expiresIn(b.expiration, now),
      formatLabels(b.labels),
    ]),
  );
}

export function formatList(items: readonly BackupSummary[], now = Date.now()): string[] {
  if (items.length === 0) return ['no backups'];
  return formatTable(
    ['NAME', 'STATUS', 'CREATED', 'AGE', 'TOOK', 'EXPIRES', 'LABELS'],
    items.map((b) => [
      b.name,
      b.phase,
      formatLocalTime(b.createdAt),
      ageOf(b.createdAt, now),
      formatDuration(msBetween(b.startedAt ?? b.createdAt, b.completedAt)),
      expiresIn(b.expiration, now),
      formatLabels(b.labels),
    ]),
  );
}

export const ageOf = (iso: string | undefined, now: number): string => {
  const at = iso ? Date.parse(iso) : Number.NaN;
  return Number.isFinite(at) ? formatAge(Math.max(0, now - at)) : '-';
};

const expiresIn = (iso: string | undefined, now: number): string => {
  const at = iso ? Date.parse(iso) : Number.NaN;
  if (!Number.isFinite(at)) return 'never';
  return at <= now ? 'due' : formatAge(at - now);
};

export function formatLogLine(line: Record<string, unknown>): string {
  const { at, level, msg, ...rest } = line;
  const time = typeof at === 'number' ? formatLocalTime(new Date(at).toISOString()) : String(at ?? '');
  const extra = Object.entries(rest)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? (/\s/.test(v) ? JSON.stringify(v) : v) : JSON.stringify(v)}`)
    .join(' ');
  return `${time} ${String(level ?? 'info')
    .toUpperCase()
    .padEnd(5)} ${String(msg ?? '')}${extra ? `  ${extra}` : ''}`;
}

/** The spec without its empty defaults (null, [], {}), so describe shows what was asked for. */
function compact(value: unknown): unknown {
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.map((v) => compact(v) ?? v);
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const c = compact(v);
      if (c !== undefined) out[k] = c;
    }
    return Object.keys(out).length === 0 ? undefined : out;
  }
  return value === null ? undefined : value;
}
