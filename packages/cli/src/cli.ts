import { parseArgs } from 'node:util';
import { stringify as toYaml } from 'yaml';
import { parseApiUrl, StowageApiClient } from './api-client.js';
import type { Backup, BackupSummary, Block } from './api-types.js';
import { buildBackupReport } from './backup-report.js';
import { type BackupSpecFlags, mergeRequest, readSpecFile } from './backup-spec.js';
import { formatDryRunPlan } from './dry-run-plan.js';
import { CliError, CliErrorCode, ExitCode, formatCliError, isCliError } from './errors.js';
import { followBackup } from './follow.js';
import { formatBytes, formatDuration, formatTable, msBetween } from './format.js';
import { RESTORE_USAGE, runRestoreCommand } from './restore-command.js';
import { runScheduleCommand, SCHEDULE_USAGE } from './schedule-commands.js';

/** Where the CLI writes; injected so tests and the demo can capture it. */
export interface CliIo {
  stdout: { write(text: string): void; isTTY?: boolean };
  stderr: { write(text: string): void; isTTY?: boolean };
  /** All of stdin as text (for `-f -`). */
  readStdin?: () => Promise<string>;
}

export type CliEnv = Readonly<Record<string, string | undefined>>;

export const USAGE = `usage: stowage <command> [options]

Backups (the API at STOWAGE_API_URL, token in STOWAGE_API_TOKEN):
  backup create [NAME] [-f FILE|-] [--include-namespaces a,b] [--exclude-namespaces a,b]
                [--include-resources r,s] [--exclude-resources r,s] [--selector k=v,...]
                [--include-cluster-resources] [--default-volumes-to-fs-backup]
                [--fs-backup-timeout 1h] [--ttl 720h] [--wait] [--dry-run] [--json|-o json]
                --dry-run: validate and show the plan (blocks, hooks, volume decisions,
                estimated bytes per node, warnings); nothing is created or run
  backup get NAME [--json]            phase, progress, hooks, PVB counts, errors
  backup describe NAME [--json]       … plus the spec and the per-block table (pods, PVBs, hook runs)
  backup list [--phase P] [--limit N] [--cursor C] [--json]
  backup wait NAME [--json]           follow a running backup to its end, with progress
  backup logs NAME [--json]           the backup's log lines (--json: NDJSON as stored)
  backup cancel NAME [--json]
  backup delete NAME [--json]         its record, jobs, PVBs and stored data (a running one is canceled first)

${SCHEDULE_USAGE}

${RESTORE_USAGE}

Volume repository (key in STOWAGE_REPO_KEY):
  repo restore --repo DIR --snapshot ID --target DIR
  repo verify --repo DIR [--json]
  repo snapshots --repo DIR [--json]
  repo forget --repo DIR --tag backup=NAME [--tag KEY=VALUE …]
  repo prune --repo DIR [--grace 24h] [--json]

Exit codes: 0 ok, 1 failed, 2 bad command line, 3 (--wait) the backup or restore ended other than Completed.`;

const BACKUP_OPTIONS = {
  file: { type: 'string', short: 'f' },
  name: { type: 'string' },
  'include-namespaces': { type: 'string' },
  'exclude-namespaces': { type: 'string' },
  'include-resources': { type: 'string' },
  'exclude-resources': { type: 'string' },
  selector: { type: 'string', short: 'l' },
  'include-cluster-resources': { type: 'boolean' },
  'default-volumes-to-fs-backup': { type: 'boolean' },
  'fs-backup-timeout': { type: 'string' },
  ttl: { type: 'string' },
  wait: { type: 'boolean', short: 'w' },
  json: { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  'dry-run': { type: 'boolean' },
  phase: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Runs one `stowage …` command line and returns the exit code; never throws for expected failures. */
export async function runCli(argv: readonly string[], env: CliEnv, io: CliIo): Promise<number> {
  const [group, ...rest] = argv;
  try {
    switch (group) {
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        io.stdout.write(`${USAGE}\n`);
        return group === undefined ? ExitCode.usage : ExitCode.ok;
      case 'backup':
      case 'backups':
        return await runBackupCommand(rest, env, io);
      case 'schedule':
      case 'schedules':
        return await runScheduleCommand(rest, env, io);
      case 'restore':
      case 'restores':
        return await runRestoreCommand(rest, () => clientFromEnv(env), io, readSpecFile);
      case 'repo':
        return await runRepoCommand(rest, env, io);
      default:
        throw new CliError(CliErrorCode.usage, `unknown command ${JSON.stringify(group)}; try "stowage help"`);
    }
  } catch (err) {
    if (isCliError(err)) {
      io.stderr.write(`${formatCliError(err).join('\n')}\n`);
      return err.exitCode;
    }
    throw err;
  }
}

async function runRepoCommand(argv: readonly string[], env: CliEnv, io: CliIo): Promise<number> {
  if (argv[0] === undefined || argv[0] === 'help' || argv.includes('--help')) {
    io.stdout.write(`${USAGE}\n`);
    return argv[0] === undefined ? ExitCode.usage : ExitCode.ok;
  }
  if (!env.STOWAGE_REPO_KEY?.trim() && argv[0] !== 'help')
    throw new CliError(CliErrorCode.config, 'STOWAGE_REPO_KEY is not set; it holds the key the repository was written with');
  // Loaded only for repo commands: backup commands start faster without it.
  const { ExitCode: RepoExitCode, runRepoCli } = await import('@stowage/repository');
  const code = await runRepoCli(argv, env, {
    out: (line) => io.stdout.write(`${line}\n`),
    err: (line) => io.stderr.write(`${line}\n`),
  });
  return code === RepoExitCode.Usage ? ExitCode.usage : code === RepoExitCode.Ok ? ExitCode.ok : ExitCode.failed;
}

function parseBackupArgs(argv: readonly string[]) {
  try {
    return parseArgs({ args: [...argv], options: BACKUP_OPTIONS, allowPositionals: true, allowNegative: true, strict: true });
  } catch (err) {
    throw new CliError(CliErrorCode.usage, `${(err as Error).message.split('. To specify')[0]}; try "stowage help"`);
  }
}

export function clientFromEnv(env: CliEnv): StowageApiClient {
  return new StowageApiClient({ baseUrl: parseApiUrl(env.STOWAGE_API_URL), token: env.STOWAGE_API_TOKEN });
}

async function runBackupCommand(argv: readonly string[], env: CliEnv, io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  const { values, positionals } = parseBackupArgs(rest);
  if (values.help || command === undefined || command === 'help') {
    io.stdout.write(`${USAGE}\n`);
    return command === undefined ? ExitCode.usage : ExitCode.ok;
  }
  if (values.output !== undefined && values.output !== 'json' && values.output !== 'text')
    throw new CliError(CliErrorCode.usage, `-o/--output must be json or text, got ${JSON.stringify(values.output)}`);
  const json = values.json === true || values.output === 'json';
  const out = (text: string) => io.stdout.write(`${text}\n`);
  const printJson = (value: unknown) => out(JSON.stringify(value, null, 2));
  const nameArg = (): string => {
    const name = positionals[0];
    if (!name) throw new CliError(CliErrorCode.usage, `backup ${command}: give the backup name, e.g. "stowage backup ${command} nightly"`);
    if (positionals.length > 1) throw new CliError(CliErrorCode.usage, `backup ${command}: one name only, got ${positionals.join(' ')}`);
    return name;
  };
  const onlyFor = (flags: string[], allowed: string[]) => {
    const wrong = flags.filter((f) => values[f as keyof typeof values] !== undefined && !allowed.includes(f));
    if (wrong.length > 0)
      throw new CliError(CliErrorCode.usage, `backup ${command} does not take ${wrong.map((f) => `--${f}`).join(', ')}`);
  };
  onlyFor(Object.keys(values), ['json', 'output', 'help', ...allowedFlags(command)]);

  const client = clientFromEnv(env);
  switch (command) {
    case 'create': {
      if (positionals.length > 1) throw new CliError(CliErrorCode.usage, `backup create: one name only, got ${positionals.join(' ')}`);
      if (positionals[0] && values.name && positionals[0] !== values.name)
        throw new CliError(CliErrorCode.usage, 'backup create: the name is given twice (argument and --name) with different values');
      const flags: BackupSpecFlags = {
        name: values.name ?? positionals[0],
        includeNamespaces: values['include-namespaces'],
        excludeNamespaces: values['exclude-namespaces'],
        includeResources: values['include-resources'],
        excludeResources: values['exclude-resources'],
        selector: values.selector,
        includeClusterResources: values['include-cluster-resources'],
        defaultVolumesToFsBackup: values['default-volumes-to-fs-backup'],
        fsBackupTimeout: values['fs-backup-timeout'],
        ttl: values.ttl,
      };
      const fromFile = values.file ? await readSpecFile(values.file, io.readStdin) : undefined;
      const request = mergeRequest(fromFile, flags);
      if (values['dry-run']) {
        if (values.wait)
          throw new CliError(CliErrorCode.usage, 'backup create: --dry-run and --wait do not go together (a dry run runs nothing)');
        const plan = await client.planBackup(request);
        if (json) printJson(plan);
        else for (const line of formatDryRunPlan(plan)) out(line);
        return ExitCode.ok;
      }
      const created = await client.createBackup(request);
      if (!values.wait) {
        if (json) printJson(created);
        else out(`backup "${created.name}" submitted (phase ${created.phase}); follow it with: stowage backup wait ${created.name}`);
        return ExitCode.ok;
      }
      if (!json) out(`backup "${created.name}" submitted`);
      return await waitAndReport(client, created.name, json, io);
    }
    case 'wait':
      return await waitAndReport(client, nameArg(), json, io);
    case 'get': {
      const backup = await client.getBackup(nameArg());
      if (json) printJson(backup);
      else for (const line of formatBackup(backup)) out(line);
      return ExitCode.ok;
    }
    case 'describe': {
      const name = nameArg();
      const [backup, blocks] = await Promise.all([client.getBackup(name), client.allBlocks(name)]);
      if (json) printJson({ backup, blocks, report: buildBackupReport(backup, blocks) });
      else for (const line of formatDescribe(backup, blocks)) out(line);
      return ExitCode.ok;
    }
    case 'list': {
      if (positionals.length > 0) throw new CliError(CliErrorCode.usage, 'backup list takes no name; use --phase to filter');
      const limit = values.limit === undefined ? undefined : Number(values.limit);
      if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 1000))
        throw new CliError(CliErrorCode.usage, `--limit must be a whole number from 1 to 1000, got ${JSON.stringify(values.limit)}`);
      const page = await client.listBackups({
        ...(values.phase ? { phase: values.phase } : {}),
        ...(limit ? { limit } : {}),
        ...(values.cursor ? { cursor: values.cursor } : {}),
      });
      if (json) printJson(page);
      else {
        for (const line of formatList(page.items)) out(line);
        if (page.nextCursor) io.stderr.write(`more backups: stowage backup list --cursor ${page.nextCursor}\n`);
      }
      return ExitCode.ok;
    }
    case 'logs': {
      for await (const line of client.logs(nameArg())) out(json ? JSON.stringify(line) : formatLogLine(line));
      return ExitCode.ok;
    }
    case 'cancel': {
      const res = await client.cancelBackup(nameArg());
      if (json) printJson(res);
      else out(`cancel requested for backup "${res.name}" (phase ${res.phase}); it ends Canceled once its running work has stopped`);
      return ExitCode.ok;
    }
    case 'delete': {
      const res = await client.deleteBackup(nameArg());
      if (json) printJson(res);
      else if ('deleted' in res) out(`backup "${res.name}" deleted (record, jobs, PodVolumeBackups and stored data)`);
      else out(`backup "${res.name}" is ${res.phase}: it is being canceled and will be deleted once it has stopped`);
      return ExitCode.ok;
    }
    default:
      throw new CliError(CliErrorCode.usage, `unknown backup command ${JSON.stringify(command)}; try "stowage help"`);
  }
}

function allowedFlags(command: string | undefined): string[] {
  switch (command) {
    case 'create':
      return [
        'file',
        'name',
        'include-namespaces',
        'exclude-namespaces',
        'include-resources',
        'exclude-resources',
        'selector',
        'include-cluster-resources',
        'default-volumes-to-fs-backup',
        'fs-backup-timeout',
        'ttl',
        'wait',
        'dry-run',
      ];
    case 'list':
      return ['phase', 'limit', 'cursor'];
    default:
      return [];
  }
}

async function waitAndReport(client: StowageApiClient, name: string, json: boolean, io: CliIo): Promise<number> {
  // Progress goes to stderr with --json (stdout stays machine-readable), else to stdout.
  const progressStream = json ? io.stderr : io.stdout;
  const { backup, blocks } = await followBackup(client, name, {
    output: { isTTY: progressStream.isTTY === true, write: (t) => progressStream.write(t) },
  });
  if (json) io.stdout.write(`${JSON.stringify({ backup, report: buildBackupReport(backup, blocks) }, null, 2)}\n`);
  else for (const line of formatBackup(backup)) io.stdout.write(`${line}\n`);
  return backup.phase === 'Completed' ? ExitCode.ok : ExitCode.backupNotCompleted;
}

const orDash = (v: string | undefined): string => v ?? '-';

export function formatBackup(b: Backup): string[] {
  const pvb = b.podVolumeBackups;
  const pvbPhases = (['Completed', 'InProgress', 'New', 'Failed', 'Canceling', 'Canceled'] as const)
    .filter((p) => pvb[p] > 0)
    .map((p) => `${pvb[p]} ${p}`)
    .join(', ');
  const took = msBetween(b.startedAt ?? b.createdAt, b.completedAt);
  return [
    `Name:       ${b.name}`,
    `Phase:      ${b.phase}${b.failureReason ? ` (${b.failureReason})` : ''}`,
    `Created:    ${b.createdAt}`,
    `Started:    ${orDash(b.startedAt)}`,
    `Completed:  ${orDash(b.completedAt)}${took !== undefined ? ` (took ${formatDuration(took)})` : ''}`,
    ...(b.cancelRequestedAt ? [`Cancel:     requested at ${b.cancelRequestedAt}`] : []),
    ...(b.expiration ? [`Expires:    ${b.expiration}`] : []),
    `Items:      ${b.progress.itemsBackedUp}/${b.progress.totalItems} backed up`,
    `Hooks:      ${b.hookStatus.hooksAttempted} attempted, ${b.hookStatus.hooksFailed} failed`,
    `PVBs:       ${pvb.total}${pvbPhases ? ` (${pvbPhases})` : ''}`,
    `Errors:     ${b.errors}    Warnings: ${b.warnings}`,
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
          orDash(r.startedAt),
        ]),
      ).map((l) => `  ${l}`),
    );
  return lines;
}

export function formatList(items: readonly BackupSummary[]): string[] {
  if (items.length === 0) return ['no backups'];
  return formatTable(
    ['NAME', 'PHASE', 'CREATED', 'TOOK'],
    items.map((b) => [b.name, b.phase, b.createdAt, formatDuration(msBetween(b.startedAt ?? b.createdAt, b.completedAt))]),
  );
}

export function formatLogLine(line: Record<string, unknown>): string {
  const { at, level, msg, ...rest } = line;
  const time = typeof at === 'number' ? new Date(at).toISOString() : String(at ?? '');
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
