/**
 * Repository throughput with the volume repository in a directory and in S3 (a local S3 server,
 * @20minutes/s3rver, reached through the request-counting proxy of @stowage/testing), from one
 * run, with the S3 requests each pass made. Not a test: results go in BENCHMARKS.md with this
 * command.
 *
 *   pnpm bench:repository:s3
 *   BENCH_LARGE_MB=256 BENCH_SMALL_FILES=2000 pnpm bench:repository:s3
 *   pnpm bench:repository:s3 --against restic     (requests and bytes side by side with restic: bench/s3-against-restic.ts)
 */
import { randomBytes, randomFillSync } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3Storage } from '@stowage/storage';
import { type S3FaultProxy, startS3FaultProxy, startS3Server } from '@stowage/testing';
import { ObjectStoreBackend, Repository } from '../src/index.js';

const LARGE_MB = Number(process.env.BENCH_LARGE_MB ?? 256);
const SMALL_FILES = Number(process.env.BENCH_SMALL_FILES ?? 2000);
const SMALL_BYTES = 4096;
const MB = 1024 * 1024;
const KEY = randomBytes(24).toString('base64');

async function makeLarge(dir: string): Promise<number> {
  await mkdir(dir, { recursive: true });
  const files = Math.max(2, Math.ceil(LARGE_MB / 64));
  const perFile = Math.floor(LARGE_MB / files);
  for (let i = 0; i < files; i++) {
    // Half random (incompressible), half repetitive text (compresses): both kinds of volume data.
    const bytes = Buffer.alloc(perFile * MB);
    if (i % 2 === 0) randomFillSync(bytes);
    else bytes.fill(`line ${i} of a log that repeats itself\n`);
    await writeFile(join(dir, `file-${i}.bin`), bytes);
  }
  return files * perFile * MB;
}

async function makeSmall(dir: string): Promise<void> {
  for (let d = 0; d * 200 < SMALL_FILES; d++) {
    const sub = join(dir, `d${d}`);
    await mkdir(sub, { recursive: true });
    for (let f = d * 200; f < Math.min(SMALL_FILES, (d + 1) * 200); f++) await writeFile(join(sub, `f${f}.dat`), randomBytes(SMALL_BYTES));
  }
}

interface Row {
  backend: string;
  pass: string;
  seconds: number;
  rate: string;
  requests: string;
}

function requestsSince(proxy: S3FaultProxy | undefined, before: Record<string, number>): { total: number; text: string } {
  if (!proxy) return { total: 0, text: '—' };
  const parts: string[] = [];
  let total = 0;
  for (const [method, n] of Object.entries(proxy.stats.byMethod)) {
    const d = n - (before[method] ?? 0);
    if (d > 0) parts.push(`${d} ${method}`);
    total += d;
  }
  return { total, text: `${total} (${parts.join(', ')})` };
}

async function main(): Promise<void> {
  const work = await mkdtemp(join(tmpdir(), 'stowage-s3-bench-'));
  const large = join(work, 'large');
  const small = join(work, 'small');
  const largeBytes = await makeLarge(large);
  await makeSmall(small);
  const s3 = await startS3Server({ bucket: 'bench', dir: join(work, 's3') });
  const proxy = await startS3FaultProxy(s3.endpoint);
  const rows: Row[] = [];
  const perGiB: string[] = [];
  try {
    for (const kind of ['directory', 's3'] as const) {
      const store =
        kind === 's3'
          ? new S3Storage({
              bucket: s3.bucket,
              prefix: 'bench',
              endpoint: proxy.endpoint,
              forcePathStyle: true,
              credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
            })
          : undefined;
      const repoOptions = (dir: string) => ({
        dir,
        key: KEY,
        ...(store ? { backend: new ObjectStoreBackend(store, `repository-${dir.split('-').at(-1)}`) } : {}),
      });
      const pass = async <T>(label: string, bytes: number, files: number, run: () => Promise<T>): Promise<T> => {
        const before = { ...proxy.stats.byMethod };
        const t = performance.now();
        const result = await run();
        const seconds = (performance.now() - t) / 1000;
        const req = requestsSince(store ? proxy : undefined, before);
        rows.push({
          backend: kind,
          pass: label,
          seconds,
          rate: files > 1 ? `${(files / seconds).toFixed(0)} files/s` : `${(bytes / MB / seconds).toFixed(1)} MB/s`,
          requests: req.text,
        });
        if (store && label.startsWith('backup')) {
          perGiB.push(
            files > 1
              ? `${label}: ${((req.total / files) * 1000).toFixed(0)} requests per 1,000 small files`
              : `${label}: ${(req.total / (bytes / 1024 ** 3)).toFixed(0)} requests per GiB`,
          );
        }
        console.error(`${kind} | ${label} | ${seconds.toFixed(2)} s | ${rows.at(-1)!.rate} | ${req.text}`);
        return result;
      };
      const largeRepo = await Repository.init(repoOptions(join(work, `${kind}-repo-large`)));
      const first = await pass(`backup, ${LARGE_MB} MiB in ${Math.ceil(LARGE_MB / 64)} files`, largeBytes, 1, () =>
        largeRepo.backup(large),
      );
      await pass('backup again, unchanged', largeBytes, 1, () => largeRepo.backup(large));
      await pass('restore', largeBytes, 1, () => largeRepo.restore(first.snapshotId, join(work, `${kind}-restore-large`)));
      await pass('verify', largeBytes, 1, () => largeRepo.verify());
      const smallRepo = await Repository.init(repoOptions(join(work, `${kind}-repo-small`)));
      const smallFirst = await pass(`backup, ${SMALL_FILES} files of 4 KiB`, SMALL_FILES * SMALL_BYTES, SMALL_FILES, () =>
        smallRepo.backup(small),
      );
      await pass(`restore, ${SMALL_FILES} files`, SMALL_FILES * SMALL_BYTES, SMALL_FILES, () =>
        smallRepo.restore(smallFirst.snapshotId, join(work, `${kind}-restore-small`)),
      );
      store?.close();
    }
  } finally {
    await proxy.close();
    await s3.stop();
    await rm(work, { recursive: true, force: true });
  }
  console.log(`Node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? '?'}); ${new Date().toISOString()}`);
  console.log('');
  console.log('| backend | pass | seconds | rate | S3 requests |');
  console.log('|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.backend} | ${r.pass} | ${r.seconds.toFixed(2)} | ${r.rate} | ${r.requests} |`);
  console.log('');
  for (const line of perGiB) console.log(`- ${line}`);
}

if (process.argv.includes('--against')) {
  const against = process.argv[process.argv.indexOf('--against') + 1];
  if (against !== 'restic') throw new Error(`--against ${against}: only restic is supported`);
  const { s3AgainstRestic } = await import('./s3-against-restic.js');
  await s3AgainstRestic();
} else {
  await main();
}
