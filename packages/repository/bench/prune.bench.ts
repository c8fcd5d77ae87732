/**
 * Prune time and peak RSS on a repository of many chunks. Not a test: results go in BENCHMARKS.md.
 *
 *   pnpm bench:repository:prune                       (BENCH_PRUNE_FILES=60000 per backup, two backups)
 *   BENCH_PRUNE_FILES=100000 BENCH_DIR=/var/tmp pnpm bench:repository:prune
 *
 * Two backups of BENCH_PRUNE_FILES small random files each (one chunk per file); the second is
 * forgotten. Each measured step runs in a fresh child process that prints its own peak RSS
 * (getrusage maxrss): "open" (open the repository and load every index, what any backup does
 * first: the peer of the prune rows in the same run), "prune 1" (mark, sweep, retire the
 * forgotten backup's packs), "prune 2" (grace 0: delete them), "verify".
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Repository } from '../src/index.js';

const KEY = 'prune bench key';
const FILES = Number(process.env.BENCH_PRUNE_FILES ?? 60_000);
const FILE_BYTES = 1024;

async function child(mode: string, repoDir: string): Promise<void> {
  const started = performance.now();
  const repo = await Repository.open({ dir: repoDir, key: KEY, durable: false });
  let detail: unknown;
  if (mode === 'prune') detail = await repo.prune({ graceMs: 0 });
  else if (mode === 'verify') detail = await repo.verify().then((r) => ({ ok: r.ok, chunksChecked: r.chunksChecked }));
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(`${JSON.stringify({ seconds, maxRssMiB: process.resourceUsage().maxRSS / 1024, detail })}\n`);
}

async function writeFiles(dir: string, count: number): Promise<void> {
  for (let d = 0; d < count / 1000; d++) {
    const sub = join(dir, `d${d}`);
    await mkdir(sub, { recursive: true });
    const writes: Promise<void>[] = [];
    for (let f = 0; f < 1000 && d * 1000 + f < count; f++) writes.push(writeFile(join(sub, `f${f}`), randomBytes(FILE_BYTES)));
    await Promise.all(writes);
  }
}

async function bytesUnder(dir: string): Promise<number> {
  let total = 0;
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true }))
    if (e.isFile()) total += (await stat(join(e.parentPath, e.name))).size;
  return total;
}

function measure(mode: string, repoDir: string): { seconds: number; maxRssMiB: number; detail: unknown } {
  const out = execFileSync(
    process.execPath,
    ['--import', 'tsx', '--conditions=@stowage/source', import.meta.filename, '--child', mode, repoDir],
    {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  return JSON.parse(out.trim().split('\n').at(-1)!);
}

async function main(): Promise<void> {
  const work = await mkdtemp(join(process.env.BENCH_DIR ?? tmpdir(), 'stowage-prune-bench-'));
  try {
    const repoDir = join(work, 'repo');
    const repo = await Repository.init({ dir: repoDir, key: KEY, durable: false });
    for (const name of ['kept', 'doomed']) {
      const dir = join(work, name);
      await writeFiles(dir, FILES);
      const t = performance.now();
      const { stats } = await repo.backup(dir, { tags: { backup: name } });
      console.error(`backup ${name}: ${stats.newChunks} new chunks in ${((performance.now() - t) / 1000).toFixed(1)} s`);
      await rm(dir, { recursive: true });
    }
    await repo.forget({ backup: 'doomed' });
    const before = await bytesUnder(repoDir);
    const load = () => loadavg()[0]!.toFixed(1);
    const rows: string[] = [];
    for (const [label, mode] of [
      ['open + load indexes (peer)', 'open'],
      ['prune 1 (mark, sweep, retire)', 'prune'],
      ['prune 2, grace 0 (delete)', 'prune'],
      ['verify', 'verify'],
    ] as const) {
      const loadBefore = load();
      const r = measure(mode, repoDir);
      const d = r.detail as {
        liveChunks: number;
        packsScanned: number;
        packsRetired: number;
        packsDeleted: number;
        bytesFreed: number;
        ok: boolean;
        chunksChecked: number;
      };
      const what =
        mode === 'prune'
          ? `live ${d.liveChunks}, packs scanned ${d.packsScanned}, retired ${d.packsRetired}, deleted ${d.packsDeleted}, freed ${(d.bytesFreed / 2 ** 20).toFixed(1)} MiB`
          : mode === 'verify'
            ? `ok ${String(d.ok)}, ${d.chunksChecked} chunks`
            : '';
      rows.push(`| ${label} | ${r.seconds.toFixed(2)} | ${r.maxRssMiB.toFixed(0)} | ${loadBefore} | ${what} |`);
    }
    const after = await bytesUnder(repoDir);
    console.log(
      `\n${2 * FILES} chunks (${FILES} per backup, ${FILE_BYTES} B random files), repository ${(before / 2 ** 20).toFixed(1)} MiB → ${(after / 2 ** 20).toFixed(1)} MiB\n`,
    );
    console.log('| step (fresh process each) | seconds | peak RSS MiB | load before | result |');
    console.log('| --- | --- | --- | --- | --- |');
    for (const row of rows) console.log(row);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

const childAt = process.argv.indexOf('--child');
if (childAt >= 0) await child(process.argv[childAt + 1]!, process.argv[childAt + 2]!);
else await main();
