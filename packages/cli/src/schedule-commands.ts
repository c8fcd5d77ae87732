import { stringify as toYaml } from 'yaml';
import type { StowageApiClient } from './api-client.js';
import type { Schedule } from './api-types.js';
import { oneName, outputFormatOf, parseVerb, printAs } from './args.js';
import { ageOf, SPEC_FLAGS, specFlagsOf } from './backup-commands.js';
import { readSpecFile, SELECTION_OPTIONS, specFromFlags } from './backup-spec.js';
import { type CliIo, confirm } from './cli-io.js';
import { CliError, CliErrorCode, ExitCode } from './errors.js';
import { formatLocalTime, formatTable, formatTime } from './format.js';

export const SCHEDULE_USAGE = `Schedules (Velero's Schedule shape; one backup per tick, named <schedule>-<yyyyMMddHHmmss>):
  schedule create NAME --schedule CRON [-f TEMPLATE_FILE|-] [--include-namespaces a,b] [--exclude-namespaces a,b]
                  [--include-resources r,s] [--exclude-resources r,s] [--selector k=v,...]
                  [--include-cluster-resources] [--default-volumes-to-fs-backup] [--fs-backup-timeout 1h]
                  [--ttl 720h] [--paused] [--skip-immediately] [-o ...]
                  CRON: "0 3 * * *", 6 fields with seconds first, @daily, @every 6h; prefix CRON_TZ=Europe/Berlin
  schedule get [NAME ...] [-o json|yaml|table]   one row per schedule (all without a name)
  schedule describe NAME [-o ...]     spec, status, last (successful) backup, next run, skipped ticks, template
  schedule list [-o ...]
  schedule pause NAME | unpause NAME
  schedule delete NAME [--confirm]    the schedule only; its backups stay`;

const OPTIONS = {
  schedule: { type: 'string' },
  file: { type: 'string', short: 'f' },
  ...SELECTION_OPTIONS,
  'default-volumes-to-fs-backup': { type: 'boolean' },
  'fs-backup-timeout': { type: 'string' },
  ttl: { type: 'string' },
  paused: { type: 'boolean' },
  'skip-immediately': { type: 'boolean' },
  confirm: { type: 'boolean' },
} as const;

const ALLOWED: Record<string, readonly string[]> = {
  create: ['schedule', 'file', ...SPEC_FLAGS, 'paused', 'skip-immediately'],
  get: [],
  describe: [],
  list: [],
  pause: [],
  unpause: [],
  delete: ['confirm'],
};

export async function runScheduleCommand(argv: readonly string[], client: () => StowageApiClient, io: CliIo): Promise<number> {
  const verb = parseVerb(argv, { group: 'schedule', usage: SCHEDULE_USAGE, options: OPTIONS, allowed: ALLOWED }, io.stdout);
  if ('exitCode' in verb) return verb.exitCode;
  const { command, what, values, positionals } = verb;
  const format = outputFormatOf(values, what);
  const out = (text: string) => io.stdout.write(`${text}\n`);
  const show = (schedule: Schedule) => printAs(format, schedule, () => formatSchedule(schedule), out);
  const name = () => oneName(positionals, what, 'nightly');
  switch (command) {
    case 'create': {
      const n = name();
      if (!values.schedule) throw new CliError(CliErrorCode.usage, `${what}: flag --schedule is required, e.g. --schedule "0 3 * * *"`);
      const fromFile = values.file ? await readSpecFile(values.file, io.readStdin) : undefined;
      const template: Record<string, unknown> = { ...(fromFile?.spec ?? {}), ...specFromFlags(specFlagsOf(values)) };
      const spec: Record<string, unknown> = { schedule: values.schedule, template };
      if (values.paused !== undefined) spec.paused = values.paused;
      if (values['skip-immediately'] !== undefined) spec.skipImmediately = values['skip-immediately'];
      show(await client().createSchedule({ name: n, spec }));
      return ExitCode.ok;
    }
    case 'describe':
      show(await client().getSchedule(name()));
      return ExitCode.ok;
    case 'get':
    case 'list': {
      if (command === 'list' && positionals.length > 0) throw new CliError(CliErrorCode.usage, `${what} takes no name`);
      const items =
        positionals.length > 0
          ? await Promise.all(positionals.map((n) => client().getSchedule(n)))
          : (await client().listSchedules()).items;
      printAs(format, positionals.length === 1 ? items[0] : { items }, () => formatScheduleTable(items), out);
      return ExitCode.ok;
    }
    case 'pause':
    case 'unpause':
      show(await client().patchSchedule(name(), { paused: command === 'pause' }));
      return ExitCode.ok;
    case 'delete': {
      const n = name();
      if (!(await confirm(io, values.confirm === true, what, `delete schedule "${n}" (its backups stay)`))) {
        out('nothing deleted');
        return ExitCode.ok;
      }
      const res = await client().deleteSchedule(n);
      printAs(format, res, () => [`schedule "${res.name}" deleted (its backups stay)`], out);
      return ExitCode.ok;
    }
    default:
      throw new CliError(CliErrorCode.usage, `unknown schedule command ${JSON.stringify(command)}`);
  }
}

export function formatScheduleTable(items: readonly Schedule[], now = Date.now()): string[] {
  if (items.length === 0) return ['no schedules'];
  return formatTable(
    ['NAME', 'STATUS', 'SCHEDULE', 'PAUSED', 'LAST BACKUP', 'NEXT RUN', 'SKIPPED', 'AGE'],
    items.map((s) => [
      s.name,
      s.status.phase,
      String(s.spec.schedule ?? '-'),
      s.spec.paused ? 'true' : 'false',
      s.status.lastBackup?.name ?? '-',
      formatLocalTime(s.status.nextRunAt),
      String(s.status.skipped),
      ageOf(s.createdAt, now),
    ]),
  );
}

export function formatSchedule(s: Schedule, now = Date.now()): string[] {
  const lines = [
    `Name:          ${s.name}`,
    `Phase:         ${s.status.phase}`,
    `Schedule:      ${String(s.spec.schedule ?? '-')}`,
    `Paused:        ${s.spec.paused ? 'true' : 'false'}`,
    `Created:       ${formatTime(s.createdAt, now)}`,
    `Last backup:   ${s.status.lastBackup ? `${s.status.lastBackup.name} (started ${formatTime(s.status.lastBackup.startedAt, now)})` : '-'}`,
    `Last success:  ${s.status.lastSuccessfulBackup ? `${s.status.lastSuccessfulBackup.name}${s.status.lastSuccessfulBackup.completedAt ? ` (completed ${formatTime(s.status.lastSuccessfulBackup.completedAt, now)})` : ''}` : '-'}`,
    `Next run:      ${s.status.nextRunAt ? formatTime(s.status.nextRunAt, now) : s.spec.paused ? '- (paused)' : '-'}`,
    `Skipped ticks: ${s.status.skipped}${s.status.lastSkipped ? ` (last: ${s.status.lastSkipped.backup}: ${s.status.lastSkipped.reason})` : ''}`,
  ];
  for (const p of s.status.validationErrors) lines.push(`Invalid:       ${p.path}: ${p.message}`);
  lines.push(
    'Template:',
    ...toYaml(s.spec.template ?? {})
      .trimEnd()
      .split('\n')
      .map((l) => `  ${l}`),
  );
  return lines;
}
