/**
 * Stowage and restic side by side on the same generated data, in one run:
 *
 *   pnpm bench:repository --against restic        (BENCH_LARGE_MB=1024 BENCH_SMALL_FILES=20000 BENCH_DIR=/var/tmp)
 *
 * Per dataset (1 GiB of large files, half random and half log text; 20,000 × 4 KiB random files)
 * and per step (first backup, unchanged re-run, 10 % modified, restore into an empty directory)
 * each tool runs in its own process under /usr/bin/time (wall, user + system CPU, peak RSS, minor faults), the
 * two alternating which goes first, with the page cache dropped before each run
 * (`echo 3 > /proc/sys/vm/drop_caches`, needs root; the table says if it could not). Both fsync:
 * Stowage's repository is durable by default, restic's local backend syncs every file it writes.
 * restic: repository v2 with its default compression (auto), parent found by host and path.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes, randomFillSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

const LARGE_MB = Number(process.env.BENCH_LARGE_MB ?? 1024);
const SMALL_FILES = Number(process.env.BENCH_SMALL_FILES ?? 20_000);
const SMALL_BYTES = 4096;
const MB = 1024 * 1024;
const PASSWORD = randomBytes(24).toString('base64');
const PACKAGE_DIR = join(import.meta.dirname, '..');

interface Measured {
  wall: number;
  cpu: number;
  rssMiB: number;
  /** Pages the process touched first (minor faults): on a VM fresh from boot each costs several µs of system time. */
  minorFaults: number;
}
interface Row {
  dataset: string;
  step: string;
  bytes: number;
  files: number;
  stowage: Measured;
  restic: Measured;
  storedStowage?: number;
  storedRestic?: number;
}

let cacheDropped = true;
function dropCaches(): void {
  try {
    execFileSync('sh', ['-c', 'sync && echo 3 > /proc/sys/vm/drop_caches'], { stdio: 'ignore' });
  } catch {
    cacheDropped = false;
  }
}

/** Runs a command under /usr/bin/time after dropping the page cache. */
function timed(command: string, args: string[], env: NodeJS.ProcessEnv): Measured & { stdout: string } {
  dropCaches();
  const result = spawnSync('/usr/bin/time', ['-f', 'TIME %e %U %S %M %R', command, ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 64 * MB,
  });
  const line = result.stderr.split('\n').find((l) => l.startsWith('TIME '));
  if (result.status !== 0 || !line) throw new Error(`${command} ${args.join(' ')} failed (${result.status}):\n${result.stderr}`);
  const [wall, user, sys, rssKiB, minorFaults] = line.slice(5).split(' ').map(Number) as [number, number, number, number, number];
  return { wall, cpu: user + sys, rssMiB: rssKiB / 1024, minorFaults, stdout: result.stdout };
}

function stowage(step: string, repo: string, path?: string): Measured {
  return timed(process.execPath, [join(PACKAGE_DIR, 'bench', 'stowage-step.mjs'), step, repo, ...(path ? [path] : [])], {
    STOWAGE_REPO_KEY: PASSWORD,
  });
}

function restic(args: string[]): Measured {
  return timed('restic', ['--quiet', ...args], { RESTIC_PASSWORD: PASSWORD, RESTIC_CACHE_DIR: join(tmpdir(), 'restic-bench-cache') });
}

function storedBytes(dir: string): number {
  return Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
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

async function makeLarge(dir: string): Promise<{ bytes: number; files: number }> {
  await mkdir(dir, { recursive: true });
  const fileMb = Math.max(1, Math.min(256, Math.floor(LARGE_MB / 4)));
  const count = Math.max(2, Math.round(LARGE_MB / fileMb));
  for (let i = 0; i < count; i++) {
    const file = await open(join(dir, `${i % 2 ? 'log' : 'random'}-${i}.bin`), 'w');
    for (let m = 0; m < fileMb; m++) await file.write(i % 2 ? logLines(MB, i * fileMb + m) : randomFillSync(Buffer.allocUnsafe(MB)));
    await file.close();
  }
  return { bytes: count * fileMb * MB, files: count };
}

async function makeSmall(dir: string): Promise<{ bytes: number; files: number }> {
  for (let d = 0; d * 200 < SMALL_FILES; d++) {
    await mkdir(join(dir, `d${d}`), { recursive: true });
    const writes: Promise<void>[] = [];
    for (let f = d * 200; f < Math.min(SMALL_FILES, (d + 1) * 200); f++)
      writes.push(writeFile(join(dir, `d${d}`, `f${f}.dat`), randomBytes(SMALL_BYTES)));
    await Promise.all(writes);
  }
  return { bytes: SMALL_FILES * SMALL_BYTES, files: SMALL_FILES };
}

/** 10 % modified: large files get a new 10 % region in the middle; every tenth small file is rewritten. */
async function modifyLarge(dir: string): Promise<void> {
  for (const name of await readdir(dir)) {
    const file = await open(join(dir, name), 'r+');
    const { size } = await file.stat();
    const region = Math.floor(size / 10);
    await file.write(
      name.startsWith('log') ? logLines(region, 999) : randomFillSync(Buffer.allocUnsafe(region)),
      0,
      region,
      Math.floor(size / 2),
    );
    await file.close();
  }
}
async function modifySmall(dir: string): Promise<void> {
  for (let f = 0; f < SMALL_FILES; f += 10) await writeFile(join(dir, `d${Math.floor(f / 200)}`, `f${f}.dat`), randomBytes(SMALL_BYTES));
}

async function runDataset(
  work: string,
  name: string,
  tree: string,
  size: { bytes: number; files: number },
  modify: (dir: string) => Promise<void>,
  rows: Row[],
): Promise<void> {
  const sRepo = join(work, `stowage-${name}`);
  const rRepo = join(work, `restic-${name}`);
  stowage('init', sRepo);
  restic(['-r', rRepo, 'init', '--repository-version', '2']);
  const resticBackup = () => restic(['-r', rRepo, 'backup', '--host', 'bench', tree]);
  const both = (step: string, stowageFirst: boolean, s: () => Measured, r: () => Measured, extra: Partial<Row> = {}) => {
    let sm: Measured;
    let rm: Measured;
    if (stowageFirst) {
      sm = s();
      rm = r();
    } else {
      rm = r();
      sm = s();
    }
    const row: Row = { dataset: name, step, bytes: size.bytes, files: size.files, stowage: sm, restic: rm, ...extra };
    rows.push(row);
    console.error(`${name} ${step}: stowage ${sm.wall.toFixed(2)} s, restic ${rm.wall.toFixed(2)} s → ${(rm.wall / sm.wall).toFixed(2)}×`);
  };
  both('first backup', true, () => stowage('backup', sRepo, tree), resticBackup);
  rows.at(-1)!.storedStowage = storedBytes(sRepo);
  rows.at(-1)!.storedRestic = storedBytes(rRepo);
  both('unchanged re-run', false, () => stowage('backup', sRepo, tree), resticBackup);
  await modify(tree);
  both('10 % modified', true, () => stowage('backup', sRepo, tree), resticBackup);
  const sTarget = join(work, `restore-stowage-${name}`);
  const rTarget = join(work, `restore-restic-${name}`);
  both(
    'restore',
    false,
    () => stowage('restore', sRepo, sTarget),
    () => restic(['-r', rRepo, 'restore', 'latest', '--target', rTarget]),
  );
  execFileSync('diff', ['-r', '-q', tree, sTarget]);
  await rm(sTarget, { recursive: true, force: true });
  await rm(rTarget, { recursive: true, force: true });
  await rm(sRepo, { recursive: true, force: true });
  await rm(rRepo, { recursive: true, force: true });
}

export async function againstRestic(): Promise<void> {
  if (spawnSync('restic', ['version']).status !== 0) {
    console.error('restic is not on PATH: install it (Debian/Ubuntu: apt-get install restic; or https://restic.net) and run again');
    process.exit(2);
  }
  // The step processes run the compiled package, so no TypeScript transform is timed; its
  // workspace dependencies (@stowage/storage) are compiled first, as `dist/` is what they import.
  execFileSync('pnpm', ['--filter', '@stowage/repository...', 'run', 'build'], { cwd: PACKAGE_DIR, stdio: 'inherit' });
  const resticVersion = execFileSync('restic', ['version'], { encoding: 'utf8' }).trim();
  const work = await mkdtemp(join(process.env.BENCH_DIR ?? tmpdir(), 'stowage-vs-restic-'));
  const uptimeAtStart = execFileSync('uptime', { encoding: 'utf8' }).trim();
  const rows: Row[] = [];
  try {
    const large = await makeLarge(join(work, 'large'));
    await runDataset(work, `large (${large.files} files, ${large.bytes / MB} MiB)`, join(work, 'large'), large, modifyLarge, rows);
    await rm(join(work, 'large'), { recursive: true, force: true });
    const small = await makeSmall(join(work, 'small'));
    await runDataset(work, `small (${small.files} × 4 KiB)`, join(work, 'small'), small, modifySmall, rows);
  } finally {
    await rm(work, { recursive: true, force: true });
    await rm(join(tmpdir(), 'restic-bench-cache'), { recursive: true, force: true });
  }
  const uptimeAtEnd = execFileSync('uptime', { encoding: 'utf8' }).trim();
  console.log(`\nNode ${process.version}, ${resticVersion}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${new Date().toISOString()}`);
  console.log(`uptime at start: ${uptimeAtStart}\nuptime at end:   ${uptimeAtEnd}`);
  console.log(
    `page cache dropped before every run: ${cacheDropped ? 'yes' : 'NO (echo 3 > /proc/sys/vm/drop_caches failed: not root?)'}; load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}\n`,
  );
  console.log(
    '| dataset | step | tool | wall s | MB/s | files/s | CPU s | peak RSS MiB | minor faults k | stored MiB | speed Stowage ÷ restic |',
  );
  console.log('|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const row of rows) {
    for (const tool of ['stowage', 'restic'] as const) {
      const m = row[tool];
      const stored = tool === 'stowage' ? row.storedStowage : row.storedRestic;
      const ratio = tool === 'stowage' ? `**${(row.restic.wall / row.stowage.wall).toFixed(2)}**` : '';
      console.log(
        `| ${row.dataset} | ${row.step} | ${tool} | ${m.wall.toFixed(2)} | ${(row.bytes / MB / m.wall).toFixed(0)} | ${(row.files / m.wall).toFixed(0)} | ${m.cpu.toFixed(2)} | ${m.rssMiB.toFixed(0)} | ${(m.minorFaults / 1000).toFixed(0)} | ${stored === undefined ? '' : (stored / MB).toFixed(1)} | ${ratio} |`,
      );
    }
  }
}

if (!existsSync('/usr/bin/time')) throw new Error('the side-by-side benchmark needs /usr/bin/time (apt-get install time)');
