/**
 * Volume backup throughput of @stowage/repository, side by side with the raw read rate of the
 * same tree in the same run. Not a test: results go in BENCHMARKS.md with this command.
 *
 *   cd packages/repository && pnpm bench
 *   pnpm bench:repository --against restic          (side by side with restic: bench/against-restic.ts)
 *   BENCH_LARGE_MB=1024 BENCH_SMALL_FILES=20000 BENCH_DIR=/var/tmp pnpm bench
 *   pnpm bench:repository --many-volumes            (only: 100 small volumes backed up one after another)
 *
 * "Cold-ish": before every measured pass the tree's pages are dropped from the page cache with
 * posix_fadvise(DONTNEED) (per file, so other users of the machine keep their cache).
 */
import { execFileSync, execSync } from 'node:child_process';
import { randomBytes, randomFillSync } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Repository } from '../src/index.js';

const LARGE_MB = Number(process.env.BENCH_LARGE_MB ?? 1024);
const SMALL_FILES = Number(process.env.BENCH_SMALL_FILES ?? 20_000);
const SMALL_BYTES = 4096;
const KEY = randomBytes(24).toString('base64');

interface Row {
  dataset: string;
  pass: string;
  seconds: number;
  mbPerSec: number;
  filesPerSec: number;
  /** CPU seconds of this process (all threads) for the pass; empty for shell commands. */
  cpuSeconds: number | undefined;
  note: string;
}
const rows: Row[] = [];
const MB = 1024 * 1024;

function evict(dir: string): void {
  // Python's os.posix_fadvise: drop only this tree's pages from the cache.
  execFileSync('python3', [
    '-c',
    'import os,sys\nfor r,_,fs in os.walk(sys.argv[1]):\n  for f in fs:\n    p=os.path.join(r,f)\n    try:\n      fd=os.open(p,os.O_RDONLY)\n      os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)\n      os.close(fd)\n    except OSError: pass',
    dir,
  ]);
}

let cpuMark = process.cpuUsage();
function markCpu(): void {
  cpuMark = process.cpuUsage();
}
function cpuSince(): number {
  const used = process.cpuUsage(cpuMark);
  return (used.user + used.system) / 1e6;
}

function record(dataset: string, pass: string, seconds: number, bytes: number, files: number, note = '', cpuSeconds?: number): void {
  rows.push({ dataset, pass, seconds, mbPerSec: bytes / MB / seconds, filesPerSec: files / seconds, cpuSeconds, note });
  console.error(
    `${dataset} | ${pass} | ${seconds.toFixed(2)} s | ${(bytes / MB / seconds).toFixed(1)} MB/s | ${(files / seconds).toFixed(0)} files/s ${note}`,
  );
}

function timeShell(command: string, cwd: string): number {
  const t = performance.now();
  execSync(command, { cwd, stdio: ['ignore', 'ignore', 'inherit'], shell: '/bin/bash' });
  return (performance.now() - t) / 1000;
}

async function makeLarge(dir: string): Promise<{ bytes: number; files: number }> {
  await mkdir(dir, { recursive: true });
  const fileMb = Math.max(1, Math.min(256, Math.floor(LARGE_MB / 4)));
  const count = Math.max(2, Math.round(LARGE_MB / fileMb));
  const block = Buffer.allocUnsafe(MB);
  for (let i = 0; i < count; i++) {
    // Even files: random (incompressible). Odd files: log-like text with random ids (deflate ≈ 25–30 %, every line unique).
    const semi = i % 2 === 1;
    const path = join(dir, `${semi ? 'log' : 'random'}-${i}.bin`);
    const parts: Buffer[] = [];
    for (let m = 0; m < fileMb; m++) {
      if (semi) parts.push(logLines(MB, i * fileMb + m));
      else parts.push(Buffer.from(randomFillSync(block)));
    }
    await writeFile(path, Buffer.concat(parts));
  }
  return { bytes: count * fileMb * MB, files: count };
}

const WORDS = ['volume', 'backup', 'stowage', 'chunk', 'node', 'agent', 'pod', 'restore', 'verify', 'snapshot', 'INFO', 'WARN'];
function logLines(bytes: number, seq: number): Buffer {
  const ids = randomBytes(8 * 4096);
  const lines: string[] = [];
  let size = 0;
  for (let n = 0; size < bytes; n++) {
    const id = ids.toString('hex', (n % 4096) * 8, (n % 4096) * 8 + 6);
    const line = `2026-12-02T12:${String(n % 60).padStart(2, '0')}:${String((n * 7) % 60).padStart(2, '0')}.${n % 1000}Z ${WORDS[n % 12]} ${WORDS[(n * 5) % 12]} req=${id} seq=${seq}.${n} took=${(n * 13) % 997}ms\n`;
    lines.push(line);
    size += line.length;
  }
  return Buffer.from(lines.join('')).subarray(0, bytes);
}

async function makeSmall(dir: string): Promise<{ bytes: number; files: number }> {
  const perDir = 200;
  for (let d = 0; d * perDir < SMALL_FILES; d++) {
    const sub = join(dir, `d${d}`);
    await mkdir(sub, { recursive: true });
    const writes: Promise<void>[] = [];
    for (let f = d * perDir; f < Math.min(SMALL_FILES, (d + 1) * perDir); f++)
      writes.push(writeFile(join(sub, `f${f}.dat`), randomBytes(SMALL_BYTES)));
    await Promise.all(writes);
  }
  return { bytes: SMALL_FILES * SMALL_BYTES, files: SMALL_FILES };
}

async function measure(
  name: string,
  tree: string,
  size: { bytes: number; files: number },
  work: string,
  variants: { label: string; packBlobMaxBytes?: number }[],
) {
  evict(tree);
  record(name, 'raw read: tar -cf - | cat >/dev/null', timeShell(`tar -cf - . | cat > /dev/null`, tree), size.bytes, size.files);
  evict(tree);
  record(
    name,
    'raw read: find | xargs cat >/dev/null',
    timeShell(`find . -type f -print0 | xargs -0 cat > /dev/null`, tree),
    size.bytes,
    size.files,
  );
  for (const variant of variants) {
    const repoDir = join(work, `repo-${name}-${variant.label}`.replace(/[^a-z0-9-]/gi, '_'));
    const repo = await Repository.init({
      dir: repoDir,
      key: KEY,
      ...(variant.packBlobMaxBytes === undefined ? {} : { packBlobMaxBytes: variant.packBlobMaxBytes }),
    });
    const timed = async <T>(pass: string, run: () => Promise<T>, note: (result: T) => string): Promise<T> => {
      const t = performance.now();
      markCpu();
      const result = await run();
      record(name, `${pass} (${variant.label})`, (performance.now() - t) / 1000, size.bytes, size.files, note(result), cpuSince());
      return result;
    };
    evict(tree);
    const first = await timed(
      'backup, first',
      () => repo.backup(tree),
      (r) => `stored ${(r.stats.storedBytes / MB).toFixed(0)} MiB, ${r.stats.newChunks} chunks`,
    );
    evict(tree);
    await timed(
      'backup, unchanged re-run',
      () => repo.backup(tree),
      (r) => `${r.stats.newChunks} new chunks`,
    );
    if (variant === variants[0]) {
      const target = join(work, `restore-${name}`);
      await timed(
        'restore',
        () => repo.restore(first.snapshotId, target),
        () => '',
      );
      await rm(target, { recursive: true, force: true });
      await timed(
        'verify',
        () => repo.verify(),
        (r) => (r.ok ? 'clean' : 'DAMAGED'),
      );
    }
    await rm(repoDir, { recursive: true, force: true });
  }
}

const VOLUMES = 100;
const VOLUME_FILE_BYTES = 32 * 1024;

/**
 * What a node agent does with many small pod volumes: one open repository, one backup per
 * volume (2 files of 32 KiB), one after another. Per backup, the fixed costs show: the walk,
 * the parent lookup, the snapshot write, and any threads a backup starts.
 */
async function measureManyVolumes(work: string): Promise<void> {
  const volumes: string[] = [];
  for (let i = 0; i < VOLUMES; i++) {
    const volume = join(work, 'volumes', `v${i}`);
    await mkdir(volume, { recursive: true });
    await writeFile(join(volume, 'a'), randomBytes(VOLUME_FILE_BYTES));
    await writeFile(join(volume, 'b'), randomBytes(VOLUME_FILE_BYTES));
    volumes.push(volume);
  }
  const repoDir = join(work, 'repo-volumes');
  const repo = await Repository.init({ dir: repoDir, key: KEY });
  const name = `${VOLUMES} volumes of 2 x 32 KiB, one backup each`;
  for (const pass of ['first', 'unchanged re-run']) {
    const t = performance.now();
    markCpu();
    for (const volume of volumes) await repo.backup(volume);
    const seconds = (performance.now() - t) / 1000;
    const cpu = cpuSince();
    record(
      name,
      `backup, ${pass}`,
      seconds,
      VOLUMES * 2 * VOLUME_FILE_BYTES,
      VOLUMES * 2,
      `${((seconds * 1000) / VOLUMES).toFixed(1)} ms and ${((cpu * 1000) / VOLUMES).toFixed(1)} ms CPU per backup`,
      cpu,
    );
  }
  await repo.close();
  await rm(repoDir, { recursive: true, force: true });
}

const loadAtStart = loadavg()
  .map((l) => l.toFixed(1))
  .join(' ');

async function measureAll(work: string): Promise<void> {
  console.error(`work dir ${work}; large ${LARGE_MB} MiB, small ${SMALL_FILES} x ${SMALL_BYTES} B`);
  const large = join(work, 'large');
  const small = join(work, 'small');
  const largeSize = await makeLarge(large);
  const smallSize = await makeSmall(small);
  execSync('sync');
  await measure(`large (${largeSize.files} files, ${largeSize.bytes / MB} MiB, half random, half log text)`, large, largeSize, work, [
    { label: 'default' },
  ]);
  await measure(`small (${smallSize.files} x 4 KiB random)`, small, smallSize, work, [
    { label: 'default: packed' },
    { label: 'every chunk its own file', packBlobMaxBytes: 0 },
  ]);
  await measureManyVolumes(work);
}

async function main() {
  const base = process.env.BENCH_DIR ?? tmpdir();
  const work = await mkdtemp(join(base, 'stowage-repo-bench-'));
  try {
    if (process.argv.includes('--many-volumes')) await measureManyVolumes(work);
    else await measureAll(work);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const cpu = cpus()[0]?.model ?? 'unknown cpu';
  const loadAtEnd = loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
  console.log(
    `\nNode ${process.version}, ${cpus().length} × ${cpu}, ${new Date().toISOString()}, load average ${loadAtStart} at start, ${loadAtEnd} at end\n`,
  );
  console.log('| dataset | pass | seconds | MB/s | files/s | CPU s | note |');
  console.log('|---|---|---:|---:|---:|---:|---|');
  for (const r of rows) {
    const cpuCell = r.cpuSeconds === undefined ? '' : r.cpuSeconds.toFixed(1);
    const pass = r.pass.replaceAll('|', '\\|');
    console.log(
      `| ${r.dataset} | ${pass} | ${r.seconds.toFixed(2)} | ${r.mbPerSec.toFixed(1)} | ${r.filesPerSec.toFixed(0)} | ${cpuCell} | ${r.note} |`,
    );
  }
}

if (process.argv.includes('--against')) {
  const against = process.argv[process.argv.indexOf('--against') + 1];
  if (against !== 'restic') throw new Error(`--against ${against}: only restic is supported`);
  const { againstRestic } = await import('./against-restic.js');
  await againstRestic();
} else {
  await main();
}
