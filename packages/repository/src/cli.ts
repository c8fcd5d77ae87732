import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { isRepoError, RepoError, RepoErrorCode } from './errors.js';
import { ObjectStoreBackend } from './object-store-backend.js';
import type { PruneProgress, PruneSummary } from './prune.js';
import { type OpenOptions, Repository } from './repository.js';
import type { VerifyReport } from './verify.js';

/**
 * `repo restore|verify|snapshots`: the functions the `stowage repo …` CLI wraps, and a runnable
 * entry (`tsx --conditions=@stowage/source packages/repository/src/cli.ts verify --repo DIR`).
 * The key always comes from STOWAGE_REPO_KEY, never from an argument (it would show in `ps`).
 */
export const ExitCode = { Ok: 0, Failed: 1, Usage: 2 } as const;

export interface CliIo {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
}

type Env = Readonly<Record<string, string | undefined>>;

/**
 * `--repo DIR`, or `--repo s3://bucket/prefix/repository` for a repository in a bucket (what a
 * node agent writes with STOWAGE_STORAGE=s3://bucket/prefix): endpoint, region and path style
 * from STOWAGE_S3_ENDPOINT, STOWAGE_S3_REGION, STOWAGE_S3_FORCE_PATH_STYLE, credentials from
 * the standard AWS chain. The S3 client is loaded only here: loading the AWS SDK costs ~0.2 CPU s,
 * which every `repo` command and every process opening a directory repository paid before.
 */
export async function repoLocation(repo: string, key: string | undefined, env: Env = process.env): Promise<OpenOptions> {
  const common = { dir: repo, key: key ?? '' };
  if (!/^s3:\/\//i.test(repo)) return common;
  const path = repo.slice('s3://'.length).replace(/\/+$/, '');
  const [bucket = '', ...rest] = path.split('/');
  if (rest.length === 0) {
    throw new RepoError(
      RepoErrorCode.InvalidArgument,
      `--repo ${repo}: name the repository inside the bucket, e.g. s3://${bucket}/repository`,
    );
  }
  const root = rest.pop()!;
  const endpoint = env.STOWAGE_S3_ENDPOINT?.trim() || undefined;
  const pathStyle = env.STOWAGE_S3_FORCE_PATH_STYLE?.trim().toLowerCase();
  const { S3Storage } = await import('@stowage/storage');
  const store = new S3Storage({
    bucket,
    prefix: rest.join('/'),
    ...(endpoint ? { endpoint } : {}),
    ...(env.STOWAGE_S3_REGION?.trim() ? { region: env.STOWAGE_S3_REGION.trim() } : {}),
    forcePathStyle: pathStyle ? pathStyle === 'true' : endpoint !== undefined,
    ...(env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY
      ? { credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY } }
      : {}),
  });
  return { ...common, backend: new ObjectStoreBackend(store, root) };
}

const USAGE = [
  'usage: repo <command> [options]   (key from STOWAGE_REPO_KEY; --repo DIR or s3://bucket/prefix/repository)',
  '  restore   --repo DIR --snapshot ID --target DIR   rebuild a snapshot into DIR',
  '  verify    --repo DIR [--json]                     check every chunk and snapshot reference',
  '  snapshots --repo DIR [--json]                     list snapshots',
  '  forget    --repo DIR --tag KEY=VALUE [--tag …]      delete the snapshots with all these tags (e.g. --tag backup=NAME)',
  '  prune     --repo DIR [--grace 24h] [--json]         garbage-collect: retire unused data, delete what was retired at least --grace ago',
].join('\n');

export async function repoRestoreCommand(
  args: { repo: string; snapshot: string; target: string; key: string | undefined; env?: Env },
  io: CliIo,
): Promise<number> {
  const repo = await Repository.open(await repoLocation(args.repo, args.key, args.env));
  const result = await repo.restore(args.snapshot, args.target);
  io.out(
    `restored snapshot ${result.snapshotId} into ${args.target}: ${result.files} files, ${result.dirs} dirs, ${result.symlinks} symlinks, ${result.bytes} bytes in ${result.durationMs} ms`,
  );
  return ExitCode.Ok;
}

export async function repoVerifyCommand(
  args: { repo: string; key: string | undefined; json?: boolean; env?: Env },
  io: CliIo,
): Promise<number> {
  const repo = await Repository.open(await repoLocation(args.repo, args.key, args.env));
  const report = await repo.verify();
  if (args.json) io.out(JSON.stringify(report, null, 2));
  else for (const line of formatVerifyReport(report)) (report.ok ? io.out : io.err)(line);
  return report.ok ? ExitCode.Ok : ExitCode.Failed;
}

export async function repoSnapshotsCommand(
  args: { repo: string; key: string | undefined; json?: boolean; env?: Env },
  io: CliIo,
): Promise<number> {
  const repo = await Repository.open(await repoLocation(args.repo, args.key, args.env));
  const snapshots = await repo.listSnapshots();
  if (args.json) io.out(JSON.stringify(snapshots, null, 2));
  else {
    for (const s of snapshots) {
      const tags = Object.entries(s.tags)
        .map(([k, v]) => `${k}=${v}`)
        .join(',');
      io.out(`${s.id}  ${s.time}  ${s.totals.files} files  ${s.totals.bytes} bytes  ${tags}`);
    }
  }
  return ExitCode.Ok;
}

export async function repoForgetCommand(
  args: { repo: string; key: string | undefined; tags: Record<string, string>; json?: boolean; env?: Env },
  io: CliIo,
): Promise<number> {
  const repo = await Repository.open(await repoLocation(args.repo, args.key, args.env));
  const forgotten = await repo.forget(args.tags);
  if (args.json) io.out(JSON.stringify({ forgotten }, null, 2));
  else
    io.out(`forgot ${forgotten.length} snapshots${forgotten.length > 0 ? `: ${forgotten.join(' ')}` : ''} (their data is freed by prune)`);
  return ExitCode.Ok;
}

export async function repoPruneCommand(
  args: { repo: string; key: string | undefined; graceMs?: number; json?: boolean; env?: Env },
  io: CliIo,
): Promise<number> {
  const repo = await Repository.open(await repoLocation(args.repo, args.key, args.env));
  // Progress on stderr: at each phase change, then at most twice a second.
  let lastPhase = '';
  let lastAt = 0;
  const onProgress = (p: PruneProgress) => {
    const at = Date.now();
    if (p.phase === lastPhase && at - lastAt < 500 && p.done !== p.total) return;
    lastPhase = p.phase;
    lastAt = at;
    io.err(`prune: ${p.phase} ${p.done}/${p.total}`);
  };
  const summary = await repo.prune({ ...(args.graceMs !== undefined ? { graceMs: args.graceMs } : {}), onProgress });
  if (args.json) io.out(JSON.stringify(summary, null, 2));
  else for (const line of formatPruneSummary(summary)) io.out(line);
  return ExitCode.Ok;
}

export function formatPruneSummary(s: PruneSummary): string[] {
  return [
    `marked ${s.liveChunks} chunks in use by ${s.snapshots} snapshots; scanned ${s.packsScanned} packs${s.packsSkipped > 0 ? ` (${s.packsSkipped} unreadable, left alone)` : ''}`,
    `retired ${s.packsRetired} packs and ${s.looseRetired} loose chunks (${s.bytesRetired} bytes), rewrote ${s.packsRewritten} packs`,
    `deleted ${s.packsDeleted} packs and ${s.looseDeleted} loose chunks retired earlier: ${s.bytesFreed} bytes freed (${s.bytesDeleted} deleted, ${s.bytesWritten} written)${s.chunksRescued > 0 ? `, ${s.chunksRescued} chunks a newer snapshot uses copied out first` : ''}`,
    `${s.batchesPending} retirement batches wait for their grace period${s.batchesHeld > 0 ? ` (${s.batchesHeld} past it, kept for a backup that started before them and still runs)` : ''}; took ${s.durationMs} ms`,
  ];
}

/** `24h`, `30m`, `90s`, `500ms` or a number of seconds. */
export function parseDurationMs(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!match) return undefined;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(match[2] ?? 's') as 'ms'];
  return Number(match[1]) * unit;
}

export function formatVerifyReport(report: VerifyReport): string[] {
  const lines = [
    `checked ${report.chunksChecked} chunks and ${report.snapshotsChecked} snapshots: ${report.ok ? 'no damage' : 'DAMAGE FOUND'}`,
  ];
  for (const chunk of report.damaged) {
    lines.push(`chunk ${chunk.chunkId} ${chunk.problem}: ${chunk.detail}`);
    for (const file of chunk.files) lines.push(`  affects snapshot ${file.snapshotId} file ${JSON.stringify(file.path)}`);
  }
  for (const s of report.damagedSnapshots) lines.push(`snapshot ${s.snapshotId} unreadable: ${s.detail}`);
  for (const i of report.damagedIndexes) lines.push(`pack index ${i.packId} unreadable: ${i.detail}`);
  if (report.damagedCopies > 0) lines.push(`${report.damagedCopies} damaged duplicate copies (a good copy of each exists)`);
  return lines;
}

/** Parses argv (without `node script`), runs the command, maps errors to messages and exit codes. */
export async function runRepoCli(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  let values: Record<string, string | boolean | string[] | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...rest],
      options: {
        repo: { type: 'string' },
        snapshot: { type: 'string' },
        target: { type: 'string' },
        json: { type: 'boolean' },
        tag: { type: 'string', multiple: true },
        grace: { type: 'string' },
      },
      strict: true,
    }));
  } catch (error) {
    io.err(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
    return ExitCode.Usage;
  }
  const need = (...names: string[]) => {
    const missing = names.filter((n) => typeof values[n] !== 'string' || values[n] === '');
    if (missing.length > 0) io.err(`${command}: missing ${missing.map((n) => `--${n}`).join(', ')}\n${USAGE}`);
    return missing.length === 0;
  };
  const key = env.STOWAGE_REPO_KEY;
  try {
    switch (command) {
      case 'restore':
        if (!need('repo', 'snapshot', 'target')) return ExitCode.Usage;
        return await repoRestoreCommand(
          { repo: String(values.repo), snapshot: String(values.snapshot), target: String(values.target), key, env },
          io,
        );
      case 'verify':
        if (!need('repo')) return ExitCode.Usage;
        return await repoVerifyCommand({ repo: String(values.repo), key, json: values.json === true, env }, io);
      case 'snapshots':
        if (!need('repo')) return ExitCode.Usage;
        return await repoSnapshotsCommand({ repo: String(values.repo), key, json: values.json === true, env }, io);
      case 'forget': {
        if (!need('repo')) return ExitCode.Usage;
        const tags: Record<string, string> = {};
        for (const pair of (values.tag as string[] | undefined) ?? []) {
          const eq = pair.indexOf('=');
          if (eq <= 0) {
            io.err(`forget: --tag ${JSON.stringify(pair)} must be KEY=VALUE\n${USAGE}`);
            return ExitCode.Usage;
          }
          tags[pair.slice(0, eq)] = pair.slice(eq + 1);
        }
        if (Object.keys(tags).length === 0) {
          io.err(`forget: missing --tag KEY=VALUE (which snapshots to delete)\n${USAGE}`);
          return ExitCode.Usage;
        }
        return await repoForgetCommand({ repo: String(values.repo), key, tags, json: values.json === true, env }, io);
      }
      case 'prune': {
        if (!need('repo')) return ExitCode.Usage;
        const graceMs = typeof values.grace === 'string' ? parseDurationMs(values.grace) : undefined;
        if (typeof values.grace === 'string' && graceMs === undefined) {
          io.err(`prune: --grace ${JSON.stringify(values.grace)} is not a duration (e.g. 24h, 30m, 90s)\n${USAGE}`);
          return ExitCode.Usage;
        }
        return await repoPruneCommand(
          { repo: String(values.repo), key, json: values.json === true, env, ...(graceMs !== undefined ? { graceMs } : {}) },
          io,
        );
      }
      default:
        io.err(command ? `unknown command ${JSON.stringify(command)}\n${USAGE}` : USAGE);
        return ExitCode.Usage;
    }
  } catch (error) {
    if (isRepoError(error)) {
      io.err(`${error.code}: ${error.message}`);
      return ExitCode.Failed;
    }
    throw error;
  }
}

function isMain(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return false;
  }
}

if (isMain()) {
  const io: CliIo = { out: (line) => process.stdout.write(`${line}\n`), err: (line) => process.stderr.write(`${line}\n`) };
  runRepoCli(process.argv.slice(2), process.env, io).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = ExitCode.Failed;
    },
  );
}
