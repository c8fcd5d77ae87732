import { parseArgs } from 'node:util';
import { CliError, CliErrorCode } from '../errors.js';

export interface DemoOptions {
  /** Leave everything running after the backup (until Ctrl-C); keeps the backup storage. */
  keep: boolean;
  /** Keep the backup storage (and the process logs) in this directory. */
  out: string | undefined;
  /** Print the summary as JSON on stdout (progress goes to stderr). */
  json: boolean;
  /** Also print every service's log lines, prefixed with its name, to stderr. */
  verbose: boolean;
  /** Bound on the whole backup (start to end); default 5 minutes. */
  timeoutMs: number;
  workers: number;
  /** Restore shop into this namespace (shop stays) instead of deleting shop and restoring it. */
  restoreInto: string | undefined;
  /** Skip the restore step (backup only). */
  noRestore: boolean;
  /** Backup storage: a directory (default) or a private S3 server started for the demo. */
  storage: 'directory' | 's3';
  help: boolean;
}

export const DEMO_USAGE = `usage: pnpm demo [--keep] [--out DIR] [--json] [--verbose] [--timeout-s N] [--workers N] [--restore-into NS] [--no-restore] [--storage directory|s3]

Starts Redis (a private redis-server unless REDIS_URL is set), the Kubernetes simulator with the
demo cluster (unless KUBECONFIG points at a running simulator), three node agents, worker
processes and the API; backs up the demo cluster through the REST API with live progress; deletes
the shop namespace and restores it (volume files checked by sha256, a post-restore hook on every
pod); then prints a summary and stops everything it started.

  --keep       leave everything running for exploring (Ctrl-C stops it); the storage is kept
  --out DIR    keep the backup storage and the service logs in DIR
  --json       the summary as JSON on stdout (progress on stderr)
  --verbose    every service's log lines on stderr, prefixed with its name
  --timeout-s  give up on the backup after N seconds (default 300)
  --workers    worker processes to start (default 2)
  --restore-into NS  restore shop into namespace NS (shop is left alone) instead of deleting it
  --no-restore       back up only
  --storage    where backups go: a directory (default), or s3, a private S3 server started for
               the demo (STOWAGE_STORAGE=s3://stowage-demo; its files under --out DIR/s3 if given)`;

export function parseDemoArgs(argv: readonly string[]): DemoOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv.filter((a) => a !== '--'),
      options: {
        keep: { type: 'boolean' },
        out: { type: 'string' },
        json: { type: 'boolean' },
        verbose: { type: 'boolean' },
        'timeout-s': { type: 'string' },
        workers: { type: 'string' },
        'restore-into': { type: 'string' },
        'no-restore': { type: 'boolean' },
        storage: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new CliError(CliErrorCode.usage, `${(err as Error).message.split('. To specify')[0]}\n${DEMO_USAGE}`);
  }
  const whole = (flag: string, fallback: number, min: number, max: number): number => {
    const raw = values[flag];
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new CliError(CliErrorCode.usage, `--${flag} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`);
    return n;
  };
  const out = typeof values.out === 'string' ? values.out : undefined;
  if (out !== undefined && out.trim() === '') throw new CliError(CliErrorCode.usage, '--out needs a directory');
  const storage = values.storage ?? 'directory';
  if (storage !== 'directory' && storage !== 's3') {
    throw new CliError(CliErrorCode.usage, `--storage must be directory or s3, got ${JSON.stringify(storage)}`);
  }
  return {
    storage,
    keep: values.keep === true,
    out,
    json: values.json === true,
    verbose: values.verbose === true,
    timeoutMs: whole('timeout-s', 300, 5, 86_400) * 1000,
    workers: whole('workers', 2, 1, 16),
    restoreInto:
      typeof values['restore-into'] === 'string' && values['restore-into'].trim() !== '' ? values['restore-into'].trim() : undefined,
    noRestore: values['no-restore'] === true,
    help: values.help === true,
  };
}
