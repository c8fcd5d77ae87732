import { parseArgs } from 'node:util';
import { stringify as toYaml } from 'yaml';
import { parseApiUrl, StowageApiClient } from './api-client.js';
import type { Schedule } from './api-types.js';
import { readSpecFile } from './backup-spec.js';
import type { CliEnv, CliIo } from './cli.js';
import { CliError, CliErrorCode, ExitCode } from './errors.js';
import { formatTable } from './format.js';

export const SCHEDULE_USAGE = `Schedules (Velero's Schedule shape; one backup per tick, named <schedule>-<yyyyMMddHHmmss>):
  schedule create NAME --schedule CRON [-f TEMPLATE_FILE|-] [--include-namespaces a,b] [--ttl 720h]
                  [--paused] [--skip-immediately] [--json]
                  CRON: "0 3 * * *", 6 fields with seconds first, @daily, @every 6h; prefix CRON_TZ=Europe/Berlin
  schedule get NAME [--json]          spec, phase, last backup, last successful backup, next run, skipped ticks
  schedule list [--json]
  schedule pause NAME | unpause NAME [--json]
  schedule delete NAME [--json]       the schedule only; its backups stay`;

const OPTIONS = {
  schedule: { type: 'string' },
  file: { type: 'string', short: 'f' },
  'include-namespaces': { type: 'string' },
  ttl: { type: 'string' },
  paused: { type: 'boolean' },
  'skip-immediately': { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

const CREATE_ONLY = ['schedule', 'file', 'include-namespaces', 'ttl', 'paused', 'skip-immediately'];

export async function runScheduleCommand(argv: readonly string[], env: CliEnv, io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: [...rest], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    throw new CliError(CliErrorCode.usage, `${(err as Error).message.split('. To specify')[0]}; try "stowage help"`);
  }
  const { values, positionals } = parsed;
  if (values.help || command === undefined || command === 'help') {
    io.stdout.write(`${SCHEDULE_USAGE}\n`);
    return command === undefined ? ExitCode.usage : ExitCode.ok;
  }
  const out = (text: string) => io.stdout.write(`${text}\n`);
  const show = (schedule: Schedule) => (values.json ? out(JSON.stringify(schedule, null, 2)) : formatSchedule(schedule).forEach(out));
  const wrong = Object.keys(values).filter((f) => CREATE_ONLY.includes(f) && command !== 'create');
  if (wrong.length > 0)
    throw new CliError(CliErrorCode.usage, `schedule ${command} does not take ${wrong.map((f) => `--${f}`).join(', ')}`);
  const nameArg = (): string => {
    const [name, ...more] = positionals;
    if (!name)
      throw new CliError(CliErrorCode.usage, `schedule ${command}: give the schedule name, e.g. "stowage schedule ${command} nightly"`);
    if (more.length > 0) throw new CliError(CliErrorCode.usage, `schedule ${command}: one name only, got ${positionals.join(' ')}`);
    return name;
  };
  const client = new StowageApiClient({ baseUrl: parseApiUrl(env.STOWAGE_API_URL), token: env.STOWAGE_API_TOKEN });
  switch (command) {
    case 'create': {
      const name = nameArg();
      if (!values.schedule) throw new CliError(CliErrorCode.usage, 'schedule create: --schedule is required, e.g. --schedule "0 3 * * *"');
      const fromFile = values.file ? await readSpecFile(values.file, io.readStdin) : undefined;
      const template: Record<string, unknown> = { ...((fromFile?.spec as Record<string, unknown> | undefined) ?? {}) };
      if (values['include-namespaces']) template.includedNamespaces = values['include-namespaces'].split(',').filter(Boolean);
      if (values.ttl) template.ttl = values.ttl;
      const spec: Record<string, unknown> = { schedule: values.schedule, template };
      if (values.paused) spec.paused = true;
      if (values['skip-immediately']) spec.skipImmediately = true;
      show(await client.createSchedule({ name, spec }));
      return ExitCode.ok;
    }
    case 'get':
      show(await client.getSchedule(nameArg()));
      return ExitCode.ok;
    case 'list': {
      if (positionals.length > 0) throw new CliError(CliErrorCode.usage, 'schedule list takes no name');
      const { items } = await client.listSchedules();
      if (values.json) out(JSON.stringify({ items }, null, 2));
      else
        formatTable(
          ['NAME', 'SCHEDULE', 'PAUSED', 'PHASE', 'LAST BACKUP', 'NEXT RUN', 'SKIPPED'],
          items.map((s) => [
            s.name,
            String(s.spec.schedule ?? '-'),
            s.spec.paused ? 'yes' : 'no',
            s.status.phase,
            s.status.lastBackup?.name ?? '-',
            s.status.nextRunAt ?? '-',
            String(s.status.skipped),
          ]),
        ).forEach(out);
      return ExitCode.ok;
    }
    case 'pause':
    case 'unpause':
      show(await client.patchSchedule(nameArg(), { paused: command === 'pause' }));
      return ExitCode.ok;
    case 'delete': {
      const res = await client.deleteSchedule(nameArg());
      out(values.json ? JSON.stringify(res, null, 2) : `schedule "${res.name}" deleted (its backups stay)`);
      return ExitCode.ok;
    }
    default:
      throw new CliError(CliErrorCode.usage, `unknown schedule command ${JSON.stringify(command)}; try "stowage help"`);
  }
}

export function formatSchedule(s: Schedule): string[] {
  const lines = [
    `Name:          ${s.name}`,
    `Schedule:      ${String(s.spec.schedule ?? '-')}${s.spec.paused ? '  (paused)' : ''}`,
    `Phase:         ${s.status.phase}`,
    `Last backup:   ${s.status.lastBackup ? `${s.status.lastBackup.name} (${s.status.lastBackup.startedAt})` : '-'}`,
    `Last success:  ${s.status.lastSuccessfulBackup?.name ?? '-'}`,
    `Next run:      ${s.status.nextRunAt ?? '-'}`,
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
