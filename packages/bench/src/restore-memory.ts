/*
 * pnpm bench --scenario restore-memory (issue #45): the memory a restore's plan takes — the
 * planning process's peak RSS and Redis `used_memory` — for a one-namespace restore and a full
 * restore of a generated backup (default 300,000 objects), with this tree's code and a baseline's
 * (default: the commit before the plan streamed the tarball) side by side in one run.
 *
 * The backup is written as the product writes one (Velero's layout: `backups/<name>/<name>.tar.gz`
 * of `resources/<gr>/namespaces/<ns>/<name>.json` entries, made with storage's tar writer). The
 * baseline is `git archive <ref>` into a temporary directory with its own `pnpm install
 * --prefer-offline` (the local store first, the registry for what this tree's install left out).
 * Each plan gets a fresh redis-server and a process of its own (restore-memory-plan.main.ts,
 * copied into the baseline's tree, compiled per tree and run with plain node) that runs the
 * restores queue's processor on the restore-plan job, as the api hosts it; the driver submits the
 * restore first and samples Redis' `INFO memory` while the plan runs. In the baseline the plan ran
 * in that process; in a tree with packages/pipeline/src/restore/restore-plan-child.ts (this one) the
 * processor starts the plan's own heap-capped process, compiled beside the bundle: both processes'
 * peaks are reported. Not a timed test: a script whose figures go to BENCHMARKS.md.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createGzip } from 'node:zlib';
import { validateRestoreRequest } from '@stowage/core';
import { DEFAULT_PIPELINE_CONFIG, RestoreState, statePrefixFor, submitRestore } from '@stowage/pipeline';
import { startEmbeddedRedis } from '@stowage/platform';
import { backupLayout, FileSystemStorage, type TarEntry, writeTar } from '@stowage/storage';
import { build, type Metafile, type Plugin } from 'esbuild';
import { Redis } from 'ioredis';
import { REPO_ROOT } from './bench-env.js';
import { BenchChild } from './child-process.js';

const PLAN_MAIN = 'packages/bench/src/restore-memory-plan.main.ts';
/** The restore plan's own process (a tree without it plans in the process that hosts the restores queue). */
export const PLAN_CHILD = 'packages/pipeline/src/restore/restore-plan-child.ts';
/** The plan process's V8 heap cap for the full restore: large enough that it finishes, so its peak is measured. */
export const FULL_RESTORE_PLAN_HEAP_MB = 4096;
const QUEUE_PREFIX = '{bench}';
const BACKUP = 'memory-backup';

export interface RestoreMemoryOptions {
  objects: number;
  namespaces: number;
  /** The baseline's git ref (its tree is archived and installed apart). */
  baseline: string;
  /**
   * The one-namespace restore is planned once more per code with the plan's V8 heap capped at this
   * (MiB): does its plan fit? The baseline's process (--max-old-space-size), this tree's plan process.
   */
  cappedHeapMb: number;
  json: string | undefined;
  markdown: string | undefined;
  keepLogs: boolean;
}

/** The commit before the restore plan streamed the tarball (issue #45): the code it replaced (77345f0's parent). */
export const DEFAULT_BASELINE = 'ae3d5ce';

export const RESTORE_MEMORY_USAGE = `pnpm bench --scenario restore-memory [options]

  Plans a one-namespace restore and a full restore of a generated backup, with this tree's code
  and the baseline's, each in a process of its own against a fresh redis-server; reports the peak
  RSS (VmHWM) of that process, which hosts the restores queue, and of the plan's own process where
  the plan runs in one (this tree: its heap capped at the default for one namespace, at
  ${FULL_RESTORE_PLAN_HEAP_MB} MiB for the full restore), and Redis used_memory (the plan stored,
  and the peak above it).

  --objects N          objects in the backup (default 300000)
  --namespaces N       namespaces they are spread over (default 300)
  --baseline REF       git ref of the code compared against (default ${DEFAULT_BASELINE})
  --capped-heap MB     the one-namespace restore once more per code with the plan's heap capped at
                       MB: the baseline's process with --max-old-space-size, this tree's plan
                       process with restorePlanHeapMb; whether its plan fits (default 160)
  --json FILE          write the results as JSON
  --markdown FILE      write the printed report to FILE as well
  --keep-logs          keep the processes' logs and the baseline tree (printed path)
  -h, --help`;

export type RestoreMemoryParse = { ok: true; options: RestoreMemoryOptions } | { ok: false; problems: string[] } | { ok: 'help' };

export function parseRestoreMemoryArgs(argv: readonly string[]): RestoreMemoryParse {
  const options: RestoreMemoryOptions = {
    objects: 300_000,
    namespaces: 300,
    baseline: DEFAULT_BASELINE,
    cappedHeapMb: 160,
    json: undefined,
    markdown: undefined,
    keepLogs: false,
  };
  const problems: string[] = [];
  const ints: Record<string, 'objects' | 'namespaces' | 'cappedHeapMb'> = {
    '--objects': 'objects',
    '--namespaces': 'namespaces',
    '--capped-heap': 'cappedHeapMb',
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i] as string;
    const value = argv[i + 1];
    if (flag === '-h' || flag === '--help') return { ok: 'help' };
    if (flag === '--keep-logs') options.keepLogs = true;
    else if (flag === '--scenario') i++;
    else if (flag in ints || flag === '--baseline' || flag === '--json' || flag === '--markdown') {
      if (value === undefined || value.startsWith('--')) {
        problems.push(`${flag} needs a value`);
        continue;
      }
      i++;
      const key = ints[flag];
      if (key) {
        if (!/^\d+$/.test(value) || Number(value) < 1) problems.push(`${flag} must be a whole number >= 1, got ${JSON.stringify(value)}`);
        else options[key] = Number(value);
      } else if (flag === '--baseline') options.baseline = value;
      else if (flag === '--json') options.json = value;
      else options.markdown = value;
    } else problems.push(`unknown option ${JSON.stringify(flag)}`);
  }
  if (options.namespaces > options.objects)
    problems.push(`--namespaces (${options.namespaces}) must not exceed --objects (${options.objects})`);
  return problems.length > 0 ? { ok: false, problems } : { ok: true, options };
}

/** The namespace a one-namespace restore restores (the generator's first). */
export const namespaceName = (i: number): string => `ns-${String(i).padStart(4, '0')}`;

/**
 * The backup's objects, namespace by namespace: its Namespace, a ServiceAccount, then ConfigMaps,
 * Secrets, Services, Deployments and Pods in the proportions 40/30/10/10/10 (about 1 KB each, as
 * JSON). `objects` in all, spread evenly.
 */
export function* backupEntries(objects: number, namespaces: number): Generator<TarEntry> {
  const json = (o: unknown) => Buffer.from(JSON.stringify(o));
  // Seeded pseudo-random hex (uids, versions, secret bytes): the archive compresses as real ones do, not 40×.
  let seed = 0x2545f491;
  const hex = (chars: number) => {
    let out = '';
    while (out.length < chars) {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      out += (seed >>> 0).toString(16).padStart(8, '0');
    }
    return out.slice(0, chars);
  };
  const meta = (ns: string, name: string, app: string) => ({
    name,
    namespace: ns,
    uid: `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`,
    resourceVersion: String(Number.parseInt(hex(6), 16)),
    creationTimestamp: '2026-12-01T00:00:00Z',
    labels: { app, 'app.kubernetes.io/part-of': 'bench', tier: 'backend' },
    annotations: { 'bench.stowage.dev/note': 'generated for the restore-memory benchmark' },
  });
  for (let n = 0; n < namespaces; n++) {
    const ns = namespaceName(n);
    const count = Math.floor(objects / namespaces) + (n < objects % namespaces ? 1 : 0);
    yield {
      path: `resources/namespaces/cluster/${ns}.json`,
      data: json({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { team: ns } }, status: { phase: 'Active' } }),
    };
    if (count > 1) {
      yield {
        path: `resources/serviceaccounts/namespaces/${ns}/default.json`,
        data: json({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(ns, 'default', 'none') }),
      };
    }
    for (let i = 2; i < count; i++) {
      const slot = i % 10;
      const app = `app-${i % 25}`;
      if (slot < 4) {
        const name = `config-${i}`;
        yield {
          path: `resources/configmaps/namespaces/${ns}/${name}.json`,
          data: json({
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: meta(ns, name, app),
            data: { 'settings.yaml': `replicas: ${i}\nlog: info\nchecksum: ${hex(64)}\nfeature-${i}: enabled\n`.repeat(3) },
          }),
        };
      } else if (slot < 7) {
        const name = `secret-${i}`;
        yield {
          path: `resources/secrets/namespaces/${ns}/${name}.json`,
          data: json({
            apiVersion: 'v1',
            kind: 'Secret',
            type: 'Opaque',
            metadata: meta(ns, name, app),
            data: { password: Buffer.from(hex(96), 'hex').toString('base64'), token: Buffer.from(hex(128), 'hex').toString('base64') },
          }),
        };
      } else if (slot === 7) {
        const name = `svc-${i}`;
        yield {
          path: `resources/services/namespaces/${ns}/${name}.json`,
          data: json({
            apiVersion: 'v1',
            kind: 'Service',
            metadata: meta(ns, name, app),
            spec: {
              type: 'ClusterIP',
              clusterIP: `10.0.${n % 250}.${i % 250}`,
              selector: { app },
              ports: [{ port: 80, targetPort: 8080 }],
            },
          }),
        };
      } else {
        const name = slot === 8 ? `web-${i}` : `web-${i}-abcde`;
        const podSpec = {
          containers: [
            {
              name: 'app',
              image: 'registry.example.com/bench/app:1.2.3',
              ports: [{ containerPort: 8080 }],
              env: [{ name: 'MODE', value: 'production' }],
              resources: { requests: { cpu: '100m', memory: '128Mi' } },
            },
          ],
          serviceAccountName: 'default',
        };
        yield slot === 8
          ? {
              path: `resources/deployments.apps/namespaces/${ns}/${name}.json`,
              data: json({
                apiVersion: 'apps/v1',
                kind: 'Deployment',
                metadata: meta(ns, name, app),
                spec: { replicas: 1, selector: { matchLabels: { app } }, template: { metadata: { labels: { app } }, spec: podSpec } },
                status: { replicas: 1, readyReplicas: 1 },
              }),
            }
          : {
              path: `resources/pods/namespaces/${ns}/${name}.json`,
              data: json({
                apiVersion: 'v1',
                kind: 'Pod',
                metadata: meta(ns, name, app),
                spec: { ...podSpec, nodeName: `node-${i % 50}` },
                status: { phase: 'Running', podIP: `10.1.${n % 250}.${i % 250}` },
              }),
            };
      }
    }
  }
}

export interface PlanRun {
  restore: 'one namespace' | 'full';
  code: 'baseline' | 'this tree';
  /**
   * The --capped-heap run: the V8 heap cap (MiB) the plan ran under — the baseline's process
   * (--max-old-space-size), this tree's plan process (restorePlanHeapMb). Absent for the other runs.
   */
  heapCapMb?: number;
  /** Where the plan runs in a process of its own: that process's V8 heap cap (MiB) in this run. */
  planHeapMb?: number;
  /** The plan's outcome (items planned, not selected), or why it did not finish. */
  items?: number;
  skipped?: number;
  error?: string;
  planMs?: number;
  /** The process hosting the restores queue (the planning script's): its RSS before the plan. */
  rssBeforeBytes?: number;
  /** That process's peak RSS (VmHWM): the baseline's plan ran in it; this tree's only hosts the queue. */
  peakRssBytes?: number;
  /** The plan's own process's peak RSS (VmHWM), where the plan runs in one. */
  planProcessPeakRssBytes?: number;
  /** used_memory after the restore was submitted, before its plan. */
  redisBeforeBytes: number;
  /** used_memory after the plan − before: the plan as stored. */
  redisStoredBytes: number;
  /** The highest used_memory seen (INFO's used_memory_peak, and sampled) − after: what the writing held beyond what it stored. */
  redisTransientBytes: number;
}

export interface RestoreMemoryResult {
  objects: number;
  namespaces: number;
  baseline: string;
  thisTree: string;
  tarballBytes: number;
  runs: PlanRun[];
}

const memoryField = (info: string, field: string): number => Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(info)?.[1] ?? 0);

/** Writes the backup into `storageDir`; returns the tarball's size. */
async function writeBackup(storageDir: string, objects: number, namespaces: number): Promise<number> {
  const storage = new FileSystemStorage(storageDir);
  const key = backupLayout(BACKUP).tarball;
  const gzip = createGzip({ level: 6 });
  const writing = storage.putStream(key, gzip);
  for await (const chunk of writeTar(backupEntries(objects, namespaces), { mtime: new Date('2026-12-01T00:00:00Z') })) {
    if (!gzip.write(chunk)) await new Promise((r) => gzip.once('drain', r));
  }
  gzip.end();
  await writing;
  return (await storage.head(key))?.size ?? 0;
}

/** The baseline's tree: `git archive` of the ref, installed from the local store (the registry for what it lacks). */
function prepareBaseline(ref: string, dir: string, say: (line: string) => void): string {
  const commit = execFileSync('git', ['-C', REPO_ROOT, 'rev-parse', '--short', `${ref}^{commit}`], { encoding: 'utf8' }).trim();
  say(`  baseline ${ref} (${commit}): git archive + pnpm install --prefer-offline into ${dir}`);
  execFileSync('sh', ['-c', `git -C "${REPO_ROOT}" archive "${commit}" | tar -x -C "${dir}"`]);
  execFileSync('pnpm', ['install', '--frozen-lockfile', '--prefer-offline', '--reporter=silent'], {
    cwd: dir,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return commit;
}

export interface CompiledPlanMain {
  /** The planning script's bundle. */
  script: string;
  /** Whether the tree plans in a process of its own (its child's bundle sits beside the script). */
  planProcess: boolean;
}

/**
 * The planning script compiled as production runs code: one ESM bundle of the tree's workspace
 * packages (their TypeScript sources, as `tsc` would emit them), third-party packages left to
 * Node, resolved from the tree's own node_modules, in `outDir` of its own. Run with plain `node`:
 * no tsx in the process. A tree whose plan runs in a process of its own gets that process's entry
 * bundled the same way to `restore-plan-child.js` beside it, where the compiled
 * restore-plan-process.ts looks for it (`new URL('./restore-plan-child.js', import.meta.url)`), and
 * a package.json of `"type": "module"` so the `.js` files run as ESM.
 */
export async function compilePlanMain(tree: string, outDir: string): Promise<CompiledPlanMain> {
  await mkdir(outDir, { recursive: true });
  await writeFile(join(outDir, 'package.json'), `${JSON.stringify({ type: 'module' })}\n`);
  const script = join(outDir, 'restore-memory-plan.js');
  await bundleForNode(tree, PLAN_MAIN, script);
  const planProcess = existsSync(join(tree, PLAN_CHILD));
  if (planProcess) await bundleForNode(tree, PLAN_CHILD, join(outDir, 'restore-plan-child.js'));
  return { script, planProcess };
}

/**
 * One ESM bundle of `entry` (relative to `tree`) as production runs it: the tree's workspace
 * packages compiled in, third-party packages left to Node, resolved from the tree's own
 * node_modules. Returns esbuild's metafile: what the bundle imports.
 */
export async function bundleForNode(tree: string, entry: string, outfile: string): Promise<Metafile> {
  const thirdPartyExternal: Plugin = {
    name: 'third-party-external',
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.path.startsWith('@stowage/') || args.pluginData === 'resolving') return undefined;
        if (args.path.startsWith('node:')) return { path: args.path, external: true };
        const resolved = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: 'resolving' });
        if (resolved.errors.length > 0) return { errors: resolved.errors };
        return { path: resolved.path, external: true };
      });
    },
  };
  const result = await build({
    entryPoints: [join(tree, entry)],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['@stowage/source'],
    plugins: [thirdPartyExternal],
    logLevel: 'error',
    metafile: true,
  });
  return result.metafile;
}

async function planOnce(opts: {
  tree: string;
  /** The compiled planning script (compilePlanMain). */
  compiled: CompiledPlanMain;
  storageDir: string;
  restore: PlanRun['restore'];
  code: PlanRun['code'];
  logDir: string;
  /** The --capped-heap run's cap. */
  heapCapMb: number | undefined;
}): Promise<PlanRun> {
  const { script, planProcess } = opts.compiled;
  // The cap goes where the plan runs: its own process (BENCH_PLAN_HEAP_MB → restorePlanHeapMb), else the whole process.
  const planHeapMb = planProcess ? (opts.heapCapMb ?? (opts.restore === 'full' ? FULL_RESTORE_PLAN_HEAP_MB : undefined)) : undefined;
  const processHeapMb = planProcess ? undefined : opts.heapCapMb;
  const redisServer = await startEmbeddedRedis();
  const redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
  const name = `${opts.restore === 'full' ? 'full' : 'one-ns'}-${opts.code === 'baseline' ? 'baseline' : 'new'}${opts.heapCapMb ? `-capped-${opts.heapCapMb}` : ''}`;
  let child: BenchChild | undefined;
  try {
    const validated = validateRestoreRequest({
      spec: { backupName: BACKUP, ...(opts.restore === 'full' ? {} : { includedNamespaces: [namespaceName(0)] }) },
    });
    if (!validated.ok) throw new Error(`restore spec: ${JSON.stringify(validated.problems)}`);
    const restores = new RestoreState({ redis, prefix: statePrefixFor(QUEUE_PREFIX) });
    await submitRestore({ restores, connection: redis, queuePrefix: QUEUE_PREFIX }, { name, spec: validated.value });
    const info = async () => redis.info('memory');
    const redisBeforeBytes = memoryField(await info(), 'used_memory');
    let sampledPeak = redisBeforeBytes;
    let line: string | undefined;
    child = new BenchChild({
      name,
      script,
      compiled: true,
      nodeArgs: processHeapMb ? [`--max-old-space-size=${processHeapMb}`] : [],
      env: {
        ...process.env,
        BENCH_PLAN_HEAP_MB: planHeapMb ? String(planHeapMb) : undefined,
        REDIS_URL: redisServer.url,
        BENCH_RESTORE: name,
        BENCH_QUEUE_PREFIX: QUEUE_PREFIX,
        BENCH_STORAGE: opts.storageDir,
      },
      cwd: opts.tree,
      logFile: join(opts.logDir, `${name}.log`),
      onLine: (l) => {
        if (l.startsWith('RESULT ')) line = l.slice('RESULT '.length);
      },
    });
    while (!child.hasExited) {
      sampledPeak = Math.max(sampledPeak, memoryField(await info(), 'used_memory'));
      await new Promise((r) => setTimeout(r, 20));
    }
    const end = await info();
    const after = memoryField(end, 'used_memory');
    const peak = Math.max(sampledPeak, memoryField(end, 'used_memory_peak'));
    const base = {
      restore: opts.restore,
      code: opts.code,
      ...(opts.heapCapMb ? { heapCapMb: opts.heapCapMb } : {}),
      // Unset, the plan process's cap is the config's default (the RESULT line names it).
      ...(planProcess ? { planHeapMb: planHeapMb ?? DEFAULT_PIPELINE_CONFIG.restorePlanHeapMb } : {}),
      redisBeforeBytes,
      redisStoredBytes: after - redisBeforeBytes,
      redisTransientBytes: peak - after,
    };
    if (!line) {
      const lines = child.lastLines(30);
      // The plan's own process out of memory fails the restore with a message naming its setting.
      const planOom = lines.map((l) => /needs more than its (\d+) MiB heap/.exec(l)).find((m) => m);
      if (planOom) return { ...base, planHeapMb: Number(planOom[1]), error: "out of memory (the plan process's V8 heap)" };
      const oom = lines.some((l) => /heap out of memory|Allocation failed/.test(l));
      return { ...base, error: oom ? 'out of memory (V8 heap)' : `no result: ${lines.slice(-3).join(' | ').slice(0, 300)}` };
    }
    const r = JSON.parse(line) as {
      result: { items?: number; skipped?: number };
      planMs: number;
      rssBeforeBytes: number;
      peakRssBytes: number;
      /** Absent in a tree that plans in the process itself. */
      planHeapMb?: number;
      planPeakRssBytes?: number;
    };
    return {
      ...base,
      ...(r.result.items !== undefined ? { items: r.result.items } : {}),
      ...(typeof r.result.skipped === 'number' ? { skipped: r.result.skipped } : {}),
      planMs: Math.round(r.planMs),
      rssBeforeBytes: r.rssBeforeBytes,
      peakRssBytes: r.peakRssBytes,
      ...(r.planHeapMb !== undefined ? { planHeapMb: r.planHeapMb } : {}),
      ...(r.planPeakRssBytes !== undefined ? { planProcessPeakRssBytes: r.planPeakRssBytes } : {}),
    };
  } finally {
    await child?.stop(2_000);
    redis.disconnect();
    await redisServer.stop();
  }
}

export async function runRestoreMemory(opts: RestoreMemoryOptions, say: (line: string) => void): Promise<RestoreMemoryResult> {
  const work = await mkdtemp(join(tmpdir(), 'stowage-bench-restore-memory-'));
  const logDir = join(work, 'logs');
  const storageDir = join(work, 'storage');
  const baselineDir = join(work, 'baseline');
  await mkdir(logDir, { recursive: true });
  await mkdir(baselineDir, { recursive: true });
  try {
    const baseline = prepareBaseline(opts.baseline, baselineDir, say);
    // The same planning script in both trees: only the code it runs differs.
    await copyFile(fileURLToPath(new URL('./restore-memory-plan.main.ts', import.meta.url)), join(baselineDir, PLAN_MAIN));
    const compiled = {
      baseline: await compilePlanMain(baselineDir, join(work, 'plan-baseline')),
      'this tree': await compilePlanMain(REPO_ROOT, join(work, 'plan-this-tree')),
    };
    const thisTree = execFileSync('git', ['-C', REPO_ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    say(`  writing a backup of ${opts.objects} objects in ${opts.namespaces} namespaces`);
    const tarballBytes = await writeBackup(storageDir, opts.objects, opts.namespaces);
    const runs: PlanRun[] = [];
    const plans: Array<[PlanRun['restore'], number | undefined]> = [
      ['one namespace', undefined],
      ['one namespace', opts.cappedHeapMb],
      ['full', undefined],
    ];
    for (const [restore, heapCapMb] of plans) {
      for (const [code, tree] of [
        ['baseline', baselineDir],
        ['this tree', REPO_ROOT],
      ] as const) {
        const where = compiled[code].planProcess ? "the plan process's heap" : 'heap';
        say(`  planning: ${restore} restore, ${code}${heapCapMb ? `, ${where} capped at ${heapCapMb} MiB` : ''}`);
        const run = await planOnce({ tree, compiled: compiled[code], storageDir, restore, code, logDir, heapCapMb });
        runs.push(run);
        const planProcess =
          run.planHeapMb !== undefined ? `; plan process (heap ≤ ${run.planHeapMb} MiB) peak RSS ${mib(run.planProcessPeakRssBytes)}` : '';
        say(
          `    ${run.error ?? `${run.items} items planned, ${run.skipped} not selected in ${run.planMs} ms`}; peak RSS ${mib(run.peakRssBytes)}${planProcess}; Redis stored ${mib(run.redisStoredBytes)}, transient ${mib(run.redisTransientBytes)}`,
        );
      }
    }
    return { objects: opts.objects, namespaces: opts.namespaces, baseline, thisTree, tarballBytes, runs };
  } finally {
    if (opts.keepLogs) say(`  kept ${work}`);
    else await rm(work, { recursive: true, force: true });
  }
}

export const mib = (bytes: number | undefined): string => (bytes === undefined ? '–' : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);

/** Where a run's plan ran: its own process's peak where it has one, else the process hosting the restores queue. */
const planPeakOf = (x: PlanRun): number | undefined => (x.planHeapMb !== undefined ? x.planProcessPeakRssBytes : x.peakRssBytes);

export interface RestoreMemoryTargets {
  /**
   * The one-namespace restore's peak RSS where its plan ran, this tree ÷ baseline (target ≤ 0.2):
   * this tree's plan process against the baseline's process (which hosted the queue and ran the
   * plan). Beside it, not judged: this tree's process hosting the restores queue.
   */
  oneNamespaceRssRatio: {
    value: number | null;
    met: boolean;
    baselineBytes: number | null;
    thisTreeBytes: number | null;
    thisTreeHostingBytes: number | null;
  };
  /** Redis: the most the plan's writing held beyond what it stored, this tree, over both restores (target ≤ 2 MiB: a transaction is ≤ 1 MiB). */
  transientBytes: { value: number; met: boolean };
}

export function restoreMemoryTargets(r: RestoreMemoryResult): RestoreMemoryTargets {
  const find = (restore: PlanRun['restore'], code: PlanRun['code']) =>
    r.runs.find((x) => x.restore === restore && x.code === code && x.heapCapMb === undefined);
  const baseRun = find('one namespace', 'baseline');
  const mineRun = find('one namespace', 'this tree');
  const base = baseRun && planPeakOf(baseRun);
  const mine = mineRun && planPeakOf(mineRun);
  const ratio = base && mine ? mine / base : null;
  const transient = Math.max(0, ...r.runs.filter((x) => x.code === 'this tree' && !x.error).map((x) => x.redisTransientBytes));
  return {
    oneNamespaceRssRatio: {
      value: ratio,
      met: ratio !== null && ratio <= 0.2,
      baselineBytes: base ?? null,
      thisTreeBytes: mine ?? null,
      thisTreeHostingBytes: mineRun?.peakRssBytes ?? null,
    },
    transientBytes: { value: transient, met: transient <= 2 * 1024 * 1024 },
  };
}

export function renderRestoreMemoryMarkdown(r: RestoreMemoryResult, command: string, startedAt: string): string {
  const t = restoreMemoryTargets(r);
  const o = t.oneNamespaceRssRatio;
  const heapCap = (x: PlanRun) =>
    x.planHeapMb !== undefined ? `${x.planHeapMb} MiB, plan process` : x.heapCapMb ? `${x.heapCapMb} MiB, whole process` : "Node's default";
  // Bold: the peak of the process the plan ran in, which the target compares.
  const hostingPeak = (x: PlanRun) => (x.planHeapMb === undefined ? `**${mib(x.peakRssBytes)}**` : mib(x.peakRssBytes));
  const planPeak = (x: PlanRun) =>
    x.planHeapMb === undefined ? '– (planned in the hosting process)' : `**${mib(x.planProcessPeakRssBytes)}**`;
  const rows = r.runs.map(
    (x) =>
      `| ${x.restore}${x.heapCapMb ? `, heap ≤ ${x.heapCapMb} MiB` : ''} | ${x.code === 'baseline' ? `baseline (${r.baseline})` : `this tree (${r.thisTree})`} | ${heapCap(x)} | ${x.error ? `**${x.error}**` : `${x.items} / ${x.skipped}`} | ${x.planMs === undefined ? '–' : `${(x.planMs / 1000).toFixed(1)} s`} | ${mib(x.rssBeforeBytes)} | ${hostingPeak(x)} | ${planPeak(x)} | ${mib(x.redisStoredBytes)} | ${mib(x.redisTransientBytes)} |`,
  );
  const ownProcess = r.runs.some((x) => x.planHeapMb !== undefined);
  return [
    `\`${command}\` (${startedAt}): ${r.objects.toLocaleString('en')} objects in ${r.namespaces} namespaces, tarball ${mib(r.tarballBytes)}.`,
    '',
    "| restore | code | plan's V8 heap cap | items planned / not selected | plan | process hosting the restores queue: RSS before | process hosting the restores queue, peak | plan's own process, peak | Redis: plan stored | Redis: peak above stored |",
    '|---|---|---|--:|--:|--:|--:|--:|--:|--:|',
    ...rows,
    '',
    ...(ownProcess
      ? [
          `Peak RSS is VmHWM; bold, the process the plan ran in. Where the plan runs in a process of its own (restorePlanHeapMb), its V8 heap is capped at the config's default for the one-namespace restore, at ${FULL_RESTORE_PLAN_HEAP_MB} MiB for the full restore (so that it finishes) and at the \`--capped-heap\` value in that run; where it ran in the process hosting the restores queue, that process is capped (--max-old-space-size) only in the \`--capped-heap\` run.`,
          '',
        ]
      : []),
    `One-namespace peak RSS where the plan ran, this tree ÷ baseline: ${mib(o.thisTreeBytes ?? undefined)} ÷ ${mib(o.baselineBytes ?? undefined)} = ${o.value === null ? '–' : o.value.toFixed(3)} (target ≤ 0.2: ${o.met ? 'met' : 'missed'}); beside it, this tree's process hosting the restores queue peaked at ${mib(o.thisTreeHostingBytes ?? undefined)}. Redis above the stored plan at most ${mib(t.transientBytes.value)} (target ≤ 2 MiB, a write is ≤ 1 MiB: ${t.transientBytes.met ? 'met' : 'missed'}).`,
    '',
  ].join('\n');
}
