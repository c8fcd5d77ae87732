/**
 * What a backup costs in object storage, Stowage and restic side by side on the same S3 server
 * in one run: requests by operation, object bytes written and read, wall time.
 *
 *   pnpm bench:repository:s3 --against restic          (BENCH_LARGE_MB=1024 BENCH_SMALL_FILES=20000 BENCH_DIR=/var/tmp)
 *
 * The S3 server is the tests' (@stowage/testing's s3rver in a child process), each tool with its
 * own bucket, reached through a counting proxy (the fault proxy with no faults): the proxy
 * counts what reached the server for both tools, and Stowage's own request meter must agree with
 * it to the request and the byte (the run stops if it does not).
 *
 * Per dataset (1 GiB of large files, half random and half log text; 20,000 × 4 KiB random
 * files): first backup, unchanged re-run, 10 % modified, restore of the latest snapshot into an
 * empty directory, then another 10 % modified backup and a prune after forgetting the oldest
 * half of the four snapshots. Stowage runs as a node agent does: one long-lived process with
 * the repository open (its indexes in memory between backups); restic runs a process per step
 * with its local cache (RESTIC_CACHE_DIR), as its users run it. "cold" rows run the unchanged
 * re-run again in a fresh Stowage process and with restic's cache removed. Stowage's prune is
 * two runs with no grace period (the first retires what is unused, the second deletes it after
 * the grace; in production the grace is a day), restic's is `forget` + `prune` with its defaults.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomFillSync } from 'node:crypto';
import { mkdir, mkdtemp, open, readdir, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { S3Storage, type StorageCost, StorageMeter } from '@stowage/storage';
import { type S3FaultProxy, type S3Server, startS3FaultProxy, startS3Server } from '@stowage/testing';
import { ObjectStoreBackend, Repository } from '../src/index.js';

const LARGE_MB = Number(process.env.BENCH_LARGE_MB ?? 1024);
const SMALL_FILES = Number(process.env.BENCH_SMALL_FILES ?? 20_000);
const MB = 1024 * 1024;
const PASSWORD = randomBytes(24).toString('base64');
const OPS = ['put', 'get', 'head', 'list', 'delete'] as const;

// ---------------------------------------------------------------- the Stowage process

interface S3Access {
  endpoint: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
}

type StepRequest =
  | { step: 'init' | 'open' }
  | { step: 'backup'; source: string; run: string }
  | { step: 'restore'; target: string }
  | { step: 'forget'; runs: string[] }
  | { step: 'prune' };

/** Child: holds the repository open and runs the steps it reads on stdin, one JSON line each. */
async function stowageChild(access: S3Access): Promise<void> {
  const store = new S3Storage({
    bucket: access.bucket,
    endpoint: access.endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: access.accessKeyId, secretAccessKey: access.secretAccessKey },
  });
  const where = { dir: `s3://${access.bucket}/repository`, key: keyFromEnv(), backend: new ObjectStoreBackend(store) };
  let repo: Repository | undefined;
  for await (const line of createInterface({ input: process.stdin })) {
    const request = JSON.parse(line) as StepRequest;
    const meter = new StorageMeter();
    const started = performance.now();
    const detail = await meter.run(async (): Promise<unknown> => {
      switch (request.step) {
        case 'init':
          repo = await Repository.init(where);
          return {};
        case 'open':
          repo = await Repository.open(where);
          return {};
        case 'backup':
          return (await repo!.backup(request.source, { tags: { run: request.run } })).stats.newChunks;
        case 'restore': {
          const latest = (await repo!.listSnapshots()).at(-1)!;
          return (await repo!.restore(latest.id, request.target)).files;
        }
        case 'forget': {
          const gone: string[] = [];
          for (const run of request.runs) gone.push(...(await repo!.forget({ run })));
          return gone.length;
        }
        case 'prune': {
          const first = await repo!.prune({ graceMs: 0 });
          const second = await repo!.prune({ graceMs: 0 });
          return { retired: first.packsRetired, rewritten: first.packsRewritten, deleted: second.packsDeleted };
        }
      }
    });
    process.stdout.write(`${JSON.stringify({ seconds: (performance.now() - started) / 1000, cost: meter.total(), detail })}\n`);
  }
  await repo?.close();
  store.close();
}

function keyFromEnv(): string {
  const key = process.env.STOWAGE_REPO_KEY;
  if (!key) throw new Error('STOWAGE_REPO_KEY is not set');
  return key;
}

/** The parent's handle on a Stowage child process. */
class StowageProcess {
  private readonly lines: AsyncIterator<string>;
  private constructor(private readonly child: ChildProcess) {
    this.lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  }

  static start(access: S3Access): StowageProcess {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--conditions=@stowage/source', import.meta.filename, '--stowage-child', JSON.stringify(access)],
      { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, STOWAGE_REPO_KEY: PASSWORD } },
    );
    return new StowageProcess(child);
  }

  async run(request: StepRequest): Promise<{ seconds: number; cost: StorageCost; detail: unknown }> {
    this.child.stdin!.write(`${JSON.stringify(request)}\n`);
    const next = await this.lines.next();
    if (next.done) throw new Error(`the Stowage process ended during ${request.step}`);
    return JSON.parse(next.value);
  }

  async stop(): Promise<void> {
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.stdin!.end();
    await exited;
  }
}

// ---------------------------------------------------------------- restic

function runRestic(args: string[], env: NodeJS.ProcessEnv): Promise<{ seconds: number; stdout: string }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    // Asynchronous: the counting proxy runs on this process's event loop.
    const child = spawn('restic', ['--quiet', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code === 0) resolve({ seconds: (performance.now() - started) / 1000, stdout });
      else reject(new Error(`restic ${args.join(' ')} exited ${code}: ${stderr}`));
    });
  });
}

// ---------------------------------------------------------------- data

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

async function makeLarge(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const fileMb = Math.max(1, Math.min(256, Math.floor(LARGE_MB / 4)));
  const count = Math.max(2, Math.round(LARGE_MB / fileMb));
  for (let i = 0; i < count; i++) {
    const file = await open(join(dir, `${i % 2 ? 'log' : 'random'}-${i}.bin`), 'w');
    for (let m = 0; m < fileMb; m++) await file.write(i % 2 ? logLines(MB, i * fileMb + m) : randomFillSync(Buffer.allocUnsafe(MB)));
    await file.close();
  }
  return `large (${count} files, ${count * fileMb} MiB)`;
}

async function makeSmall(dir: string): Promise<string> {
  for (let d = 0; d * 200 < SMALL_FILES; d++) {
    await mkdir(join(dir, `d${d}`), { recursive: true });
    const writes: Promise<void>[] = [];
    for (let f = d * 200; f < Math.min(SMALL_FILES, (d + 1) * 200); f++)
      writes.push(writeFile(join(dir, `d${d}`, `f${f}.dat`), randomBytes(4096)));
    await Promise.all(writes);
  }
  return `small (${SMALL_FILES} × 4 KiB)`;
}

/** 10 % modified: large files get a new 10 % region (at `at` of the file); every tenth small file is rewritten. */
async function modify(dir: string, at: number): Promise<void> {
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    if (entry.name.endsWith('.dat')) {
      if (Number(entry.name.slice(1, -4)) % 10 === Math.round(at * 10) % 10) await writeFile(path, randomBytes(4096));
      continue;
    }
    const file = await open(path, 'r+');
    const { size } = await file.stat();
    const region = Math.floor(size / 10);
    await file.write(
      entry.name.startsWith('log') ? logLines(region, Math.round(at * 1000)) : randomFillSync(Buffer.allocUnsafe(region)),
      0,
      region,
      Math.floor(size * at),
    );
    await file.close();
  }
}

// ---------------------------------------------------------------- the run

interface Measured {
  seconds: number;
  cost: StorageCost;
  /** What the step reported (Stowage: its result; restic: its output). */
  detail?: unknown;
}
interface Row {
  dataset: string;
  step: string;
  stowage: Measured;
  restic: Measured;
}

function proxyCost(proxy: S3FaultProxy): () => StorageCost {
  const before = structuredClone(proxy.stats);
  return () => {
    const requests = { ...proxy.stats.byOperation };
    for (const op of OPS) requests[op] -= before.byOperation[op];
    return { requests, bytesWritten: proxy.stats.bytesWritten - before.bytesWritten, bytesRead: proxy.stats.bytesRead - before.bytesRead };
  };
}

const total = (c: StorageCost) => OPS.reduce((sum, op) => sum + c.requests[op], 0);

async function runDataset(work: string, name: string, tree: string, s3: S3Server, proxy: S3FaultProxy, rows: Row[]): Promise<void> {
  const slug = name.startsWith('large') ? 'large' : 'small';
  const access = { endpoint: proxy.endpoint, accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey };
  const stowageBucket = `stowage-${slug}`;
  const resticBucket = `restic-${slug}`;
  const admin = new S3Storage({ bucket: s3.bucket, endpoint: s3.endpoint, forcePathStyle: true, credentials: access });
  for (const bucket of [stowageBucket, resticBucket]) await admin.client.send(new CreateBucketCommand({ Bucket: bucket }));
  admin.close();
  const cache = join(work, `restic-cache-${slug}`);
  const resticEnv = {
    AWS_ACCESS_KEY_ID: s3.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
    RESTIC_PASSWORD: PASSWORD,
    RESTIC_CACHE_DIR: cache,
  };
  const repo = ['-r', `s3:${proxy.endpoint}/${resticBucket}`];
  let stowage = StowageProcess.start({ ...access, bucket: stowageBucket });

  const measureStowage = async (request: StepRequest): Promise<Measured> => {
    const seen = proxyCost(proxy);
    const result = await stowage.run(request);
    const server = seen();
    // The meter must say what the server saw.
    if (JSON.stringify(server) !== JSON.stringify(result.cost)) {
      throw new Error(`${name} ${request.step}: Stowage counted ${JSON.stringify(result.cost)}, the server saw ${JSON.stringify(server)}`);
    }
    return { seconds: result.seconds, cost: server, detail: result.detail };
  };
  const measureRestic = async (...commands: string[][]): Promise<Measured> => {
    const seen = proxyCost(proxy);
    let seconds = 0;
    let stdout = '';
    for (const args of commands) {
      const ran = await runRestic([...repo, ...args], resticEnv);
      seconds += ran.seconds;
      stdout = ran.stdout;
    }
    return { seconds, cost: seen(), detail: stdout };
  };
  const step = async (label: string, s: () => Promise<Measured>, r: () => Promise<Measured>) => {
    const row = { dataset: name, step: label, stowage: await s(), restic: await r() };
    rows.push(row);
    console.error(
      `${name} ${label}: requests stowage ${total(row.stowage.cost)} ${JSON.stringify(row.stowage.cost.requests)}, restic ${total(row.restic.cost)} ${JSON.stringify(row.restic.cost.requests)}`,
    );
  };

  await step(
    'init',
    () => measureStowage({ step: 'init' }),
    () => measureRestic(['init', '--repository-version', '2']),
  );
  const backupRestic = () => measureRestic(['backup', '--host', 'bench', tree]);
  await step('first backup', () => measureStowage({ step: 'backup', source: tree, run: '1' }), backupRestic);
  await step('unchanged re-run', () => measureStowage({ step: 'backup', source: tree, run: '2' }), backupRestic);
  // Cold: a fresh Stowage process (it opens the repository, reading every index) and no restic cache.
  await stowage.stop();
  stowage = StowageProcess.start({ ...access, bucket: stowageBucket });
  await rm(cache, { recursive: true, force: true });
  await step(
    'unchanged re-run, cold',
    async () => {
      const open = await measureStowage({ step: 'open' });
      const backup = await measureStowage({ step: 'backup', source: tree, run: 'cold' });
      return { seconds: open.seconds + backup.seconds, cost: sum(open.cost, backup.cost) };
    },
    backupRestic,
  );
  await modify(tree, 0.5);
  await step('10 % modified', () => measureStowage({ step: 'backup', source: tree, run: '3' }), backupRestic);
  const sTarget = join(work, `restore-stowage-${slug}`);
  const rTarget = join(work, `restore-restic-${slug}`);
  await step(
    'restore',
    () => measureStowage({ step: 'restore', target: sTarget }),
    () => measureRestic(['restore', 'latest', '--target', rTarget]),
  );
  await rm(sTarget, { recursive: true, force: true });
  await rm(rTarget, { recursive: true, force: true });
  await modify(tree, 0.2);
  // Both tools now hold five snapshots (the cold re-run's is the fifth); forget the two oldest
  // and the cold one (restic: the same three, by id in time order), then prune.
  await measureStowage({ step: 'backup', source: tree, run: '4' });
  await measureRestic(['backup', '--host', 'bench', tree]);
  const resticIds = JSON.parse((await runRestic([...repo, 'snapshots', '--json'], resticEnv)).stdout) as Array<{ short_id: string }>;
  await step(
    'forget half + prune',
    async () => {
      const forget = await measureStowage({ step: 'forget', runs: ['1', '2', 'cold'] });
      const prune = await measureStowage({ step: 'prune' });
      // Packs retired whole, rewritten (read) and deleted: what the bytes read come from.
      console.error(`${name} prune: stowage ${JSON.stringify(prune.detail)}`);
      return { seconds: forget.seconds + prune.seconds, cost: sum(forget.cost, prune.cost) };
    },
    async () => {
      const measured = await measureRestic(['forget', ...resticIds.slice(0, 3).map((s) => s.short_id)], ['prune']);
      const said = String(measured.detail ?? '').split('\n');
      console.error(`${name} prune: restic ${said.filter((l) => /unused|repack|remove|delete/i.test(l)).join(' | ')}`);
      return measured;
    },
  );
  await stowage.stop();
}

function sum(a: StorageCost, b: StorageCost): StorageCost {
  const out: StorageCost = {
    requests: { put: 0, get: 0, head: 0, list: 0, delete: 0 },
    bytesWritten: a.bytesWritten + b.bytesWritten,
    bytesRead: a.bytesRead + b.bytesRead,
  };
  for (const op of OPS) out.requests[op] = a.requests[op] + b.requests[op];
  return out;
}

const ratio = (s: number, r: number) => (r === 0 ? (s === 0 ? '1.00' : '∞') : (s / r).toFixed(2));
const mib = (bytes: number) => (bytes / MB).toFixed(bytes < 10 * MB ? 2 : 0);
const ops = (c: StorageCost) => OPS.map((op) => c.requests[op]).join(' / ');

export async function s3AgainstRestic(): Promise<void> {
  const resticVersion = await runRestic(['version'], {}).then(
    (r) => r.stdout.trim(),
    () => {
      console.error('restic is not on PATH: install it (Debian/Ubuntu: apt-get install restic) and run again');
      process.exit(2);
    },
  );
  const work = await mkdtemp(join(process.env.BENCH_DIR ?? tmpdir(), 'stowage-s3-vs-restic-'));
  const s3 = await startS3Server({ bucket: 'admin', dir: join(work, 's3') });
  const proxy = await startS3FaultProxy(s3.endpoint);
  const rows: Row[] = [];
  const loadAtStart = loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
  try {
    const large = join(work, 'large');
    await runDataset(work, await makeLarge(large), large, s3, proxy, rows);
    await rm(large, { recursive: true, force: true });
    const small = join(work, 'small');
    await runDataset(work, await makeSmall(small), small, s3, proxy, rows);
  } finally {
    await proxy.close();
    await s3.stop();
    await rm(work, { recursive: true, force: true });
  }
  const loadAtEnd = loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
  console.log(
    `\nNode ${process.version}, ${resticVersion}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${new Date().toISOString()}, load ${loadAtStart} at start, ${loadAtEnd} at end`,
  );
  console.log("Requests: put / get / head / list / delete, as the S3 server saw them (Stowage's own meter agreed on every step).\n");
  console.log(
    '| dataset | step | requests Stowage | requests restic | **requests S ÷ r** | MiB written S / r | MiB read S / r | **read S ÷ r** | wall s S / r |',
  );
  console.log('|---|---|---|---|---:|---|---|---:|---|');
  for (const { dataset, step, stowage: s, restic: r } of rows) {
    console.log(
      `| ${dataset} | ${step} | ${total(s.cost)} (${ops(s.cost)}) | ${total(r.cost)} (${ops(r.cost)}) | **${ratio(total(s.cost), total(r.cost))}** | ${mib(s.cost.bytesWritten)} / ${mib(r.cost.bytesWritten)} | ${mib(s.cost.bytesRead)} / ${mib(r.cost.bytesRead)} | **${ratio(s.cost.bytesRead, r.cost.bytesRead)}** | ${s.seconds.toFixed(1)} / ${r.seconds.toFixed(1)} |`,
    );
  }
}

const childAt = process.argv.indexOf('--stowage-child');
if (childAt >= 0) await stowageChild(JSON.parse(process.argv[childAt + 1]!) as S3Access);
