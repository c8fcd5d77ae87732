import { parseByteRate } from '@stowage/node-agent';
import { HUGE_DEFAULTS, type HugeScenario } from './huge-run.js';

/** One fs-backup scenario: B blocks (a pod each) × V volumes of S bytes, N nodes × K, W workers × C. */
export interface FsScenario {
  blocks: number;
  volumesPerPod: number;
  bytesPerVolume: number;
  filesPerVolume: number;
  nodes: number;
  loadConcurrency: number;
  /** Bytes per second per node agent (its token bucket, shared by its copies). */
  bandwidthBytesPerSec: number;
  workers: number;
  blockConcurrency: number;
  postHookMs: number;
  /** STOWAGE_HOOK_CONCURRENCY per worker (post-hooks jobs at once). */
  hookConcurrency: number;
  /** Node agents hosted per agent-host process. */
  agentsPerProcess: number;
}

export interface OrchestrationScenario {
  blocks: number;
  /** Worker counts to measure, e.g. [1, 2]. */
  workers: number[];
  /** STOWAGE_BLOCK_CONCURRENCY (and hook concurrency) of each worker. */
  concurrency: number;
}

export type Mode = 'decoupled' | 'inline';

export interface BenchOptions {
  scenario: 'default' | 'large' | 'huge';
  /** The `huge` scenario (run alone when --scenario huge). */
  huge: HugeScenario;
  fs: FsScenario;
  orchestration: OrchestrationScenario;
  modes: Mode[];
  runOrchestration: boolean;
  json: string | undefined;
  /** Where to write the Markdown report too (it is always printed); undefined = nowhere. */
  markdown: string | undefined;
  svgDir: string | undefined;
  /** Wait (up to this long) for the 1-minute load average to drop below `maxLoad` before measuring. */
  waitForLoadMs: number;
  maxLoad: number;
  keepLogs: boolean;
  /** Attribute the fs-backup modes' Redis commands to scripts and commands (MONITOR). */
  redisMonitor: boolean;
}

export const SCENARIOS: Record<'default' | 'large', { fs: FsScenario; orchestration: OrchestrationScenario }> = {
  // A few minutes on a 2-core machine: decoupled ≈ 4 waves of 2 s copies on 40 slots, inline ≈ 10× that
  // (C·W = 4 blocks at a time, each waiting for its 2 PVBs one after the other on a K = 1 node).
  default: {
    fs: {
      blocks: 80,
      volumesPerPod: 2,
      bytesPerVolume: 256 * 1024,
      filesPerVolume: 2,
      nodes: 40,
      loadConcurrency: 1,
      bandwidthBytesPerSec: 128 * 1024,
      workers: 2,
      blockConcurrency: 2,
      postHookMs: 20,
      hookConcurrency: 16,
      agentsPerProcess: 10,
    },
    orchestration: { blocks: 3_000, workers: [1, 2], concurrency: 32 },
  },
  // The default's shape, longer: 10 waves of 4 s copies per node, so the start-up ramp (every node
  // waits for its first item-block) weighs less against the bound. Inline takes ≈ 400 s.
  large: {
    fs: {
      blocks: 200,
      volumesPerPod: 2,
      bytesPerVolume: 512 * 1024,
      filesPerVolume: 4,
      nodes: 40,
      loadConcurrency: 1,
      bandwidthBytesPerSec: 128 * 1024,
      workers: 2,
      blockConcurrency: 2,
      postHookMs: 20,
      hookConcurrency: 16,
      agentsPerProcess: 10,
    },
    orchestration: { blocks: 20_000, workers: [1, 2], concurrency: 32 },
  },
};

export const USAGE = `pnpm bench [options]

  --scenario default|large|huge  preset (default: default, about four minutes here); huge = 100k pods,
                               the dispatch window against none, and a small backup during a big one
                               (restore, freeze and restore-memory have options of their own:
                               --scenario restore --help, --scenario freeze --help, …)
  --huge-pods N                pods of the big backup in the huge scenario (default 100000)
  --huge-namespaces N          their namespaces (default 1000)
  --huge-nodes N               nodes (default 100)
  --huge-tiny N                extra pods with one tiny volume copied by a PVB (default 1000)
  --huge-window N              the dispatch window measured against none (default 1000)
  --blocks B                   blocks (one pod each) in the fs-backup scenario
  --volumes V                  fs-backup volumes per pod
  --bytes S                    bytes per volume (e.g. 256KiB)
  --files F                    files per volume
  --nodes N                    nodes, one node agent each
  --load-concurrency K         node agent loadConcurrency
  --bandwidth L                per node agent bandwidth limit (e.g. 256KiB/s)
  --workers W                  worker processes
  --block-concurrency C        STOWAGE_BLOCK_CONCURRENCY per worker
  --post-hook-ms MS            scripted post hook duration
  --hook-concurrency H         STOWAGE_HOOK_CONCURRENCY per worker
  --agents-per-process M       node agents hosted per process
  --modes decoupled,inline     which fs-backup modes to run (default both; none = orchestration only)
  --orch-blocks B              volume-less, hook-less blocks in the orchestration scenario
  --orch-workers 1,2           worker counts for the orchestration scenario
  --orch-concurrency C         block and hook concurrency per worker there
  --no-orchestration           skip the orchestration scenario
  --json FILE                  write the results as JSON
  --markdown FILE              write the printed report to FILE as well (replacing it)
  --no-markdown                no file (the default; older commands pass it)
  --svg-dir DIR                timelines (default: docs/bench at the repo root); --no-svg to skip
  --wait-for-load SECONDS      wait up to this long for a quiet machine first (default 0)
  --max-load X                 the 1-minute load average that counts as quiet (default 1.5)
  --keep-logs                  keep the child processes' logs (printed path)
  --redis-monitor              attribute the fs-backup modes' Redis commands per block to scripts
                               and commands (MONITOR; costs Redis CPU: not for timings)
  -h, --help`;

export type ParseResult = { ok: true; options: BenchOptions } | { ok: false; problems: string[] } | { ok: 'help' };

const INT_FLAGS: Record<string, keyof FsScenario> = {
  '--blocks': 'blocks',
  '--volumes': 'volumesPerPod',
  '--files': 'filesPerVolume',
  '--nodes': 'nodes',
  '--load-concurrency': 'loadConcurrency',
  '--workers': 'workers',
  '--block-concurrency': 'blockConcurrency',
  '--post-hook-ms': 'postHookMs',
  '--hook-concurrency': 'hookConcurrency',
  '--agents-per-process': 'agentsPerProcess',
};

/** Parses argv (after the script name); every problem is reported at once. */
export function parseBenchArgs(argv: readonly string[], defaults: { svgDir: string }): ParseResult {
  const problems: string[] = [];
  // pnpm passes a separating `--` through to the script: ignore it.
  const args = argv.filter((a) => a !== '--');
  const scenarioAt = args.indexOf('--scenario');
  let scenario: 'default' | 'large' | 'huge' = 'default';
  if (scenarioAt >= 0) {
    const v = args[scenarioAt + 1];
    if (v === 'default' || v === 'large' || v === 'huge') scenario = v;
    else problems.push(`--scenario must be default, large, huge, restore or freeze, got ${v ?? 'nothing'}`);
    args.splice(scenarioAt, 2);
  }
  const preset = SCENARIOS[scenario === 'huge' ? 'default' : scenario];
  const huge: HugeScenario = { ...HUGE_DEFAULTS };
  const fs: FsScenario = { ...preset.fs };
  const orchestration: OrchestrationScenario = { ...preset.orchestration, workers: [...preset.orchestration.workers] };
  const opts: BenchOptions = {
    scenario,
    huge,
    fs,
    orchestration,
    modes: ['decoupled', 'inline'],
    runOrchestration: true,
    json: undefined,
    markdown: undefined,
    svgDir: defaults.svgDir,
    waitForLoadMs: 0,
    maxLoad: 1.5,
    keepLogs: false,
    redisMonitor: false,
  };
  const positiveInt = (flag: string, v: string | undefined, min = 1): number | undefined => {
    const n = Number(v);
    if (v === undefined || !Number.isInteger(n) || n < min) {
      problems.push(`${flag} needs an integer >= ${min}, got ${v ?? 'nothing'}`);
      return undefined;
    }
    return n;
  };
  for (let i = 0; i < args.length; i++) {
    const flag = args[i] ?? '';
    const value = args[i + 1];
    const take = () => {
      i++;
      return value;
    };
    if (flag === '-h' || flag === '--help') return { ok: 'help' };
    const intKey = INT_FLAGS[flag];
    if (intKey) {
      const n = positiveInt(flag, take(), intKey === 'postHookMs' ? 0 : 1);
      if (n !== undefined) fs[intKey] = n;
      continue;
    }
    switch (flag) {
      case '--bytes':
      case '--bandwidth': {
        const v = take();
        const parsed = v === undefined ? undefined : parseByteRate(v);
        if (!parsed?.ok) problems.push(`${flag} needs a byte size like 256KiB or 1MiB, got ${v ?? 'nothing'}`);
        else if (flag === '--bytes') fs.bytesPerVolume = Math.round(parsed.bytesPerSec);
        else fs.bandwidthBytesPerSec = Math.round(parsed.bytesPerSec);
        break;
      }
      case '--modes': {
        const v = take() ?? '';
        if (v === 'none') {
          opts.modes = [];
          break;
        }
        const modes = v.split(',').filter(Boolean);
        const bad = modes.filter((m) => m !== 'decoupled' && m !== 'inline');
        if (modes.length === 0 || bad.length > 0) problems.push(`--modes takes decoupled and/or inline, got ${v || 'nothing'}`);
        else opts.modes = [...new Set(modes as Mode[])];
        break;
      }
      case '--orch-blocks': {
        const n = positiveInt(flag, take());
        if (n !== undefined) orchestration.blocks = n;
        break;
      }
      case '--orch-concurrency': {
        const n = positiveInt(flag, take());
        if (n !== undefined) orchestration.concurrency = n;
        break;
      }
      case '--orch-workers': {
        const v = take() ?? '';
        const ns = v.split(',').map(Number);
        if (v === '' || ns.some((n) => !Number.isInteger(n) || n < 1))
          problems.push(`--orch-workers takes counts like 1,2, got ${v || 'nothing'}`);
        else orchestration.workers = ns;
        break;
      }
      case '--huge-pods':
      case '--huge-namespaces':
      case '--huge-nodes':
      case '--huge-tiny':
      case '--huge-window': {
        const n = positiveInt(flag, take(), flag === '--huge-tiny' || flag === '--huge-window' ? 0 : 1);
        if (n === undefined) break;
        if (flag === '--huge-pods') huge.pods = n;
        else if (flag === '--huge-namespaces') huge.namespaces = n;
        else if (flag === '--huge-nodes') huge.nodes = n;
        else if (flag === '--huge-tiny') huge.tinyVolumePods = n;
        else huge.blocksInFlightPerBackup = n;
        break;
      }
      case '--no-orchestration':
        opts.runOrchestration = false;
        break;
      case '--json': {
        const v = take();
        if (!v || v.startsWith('--')) problems.push('--json needs a file name');
        else opts.json = v;
        break;
      }
      case '--markdown': {
        const v = take();
        if (!v || v.startsWith('--')) problems.push('--markdown needs a file name');
        else opts.markdown = v;
        break;
      }
      case '--no-markdown':
        opts.markdown = undefined;
        break;
      case '--svg-dir': {
        const v = take();
        if (!v || v.startsWith('--')) problems.push('--svg-dir needs a directory');
        else opts.svgDir = v;
        break;
      }
      case '--no-svg':
        opts.svgDir = undefined;
        break;
      case '--wait-for-load': {
        const n = Number(take());
        if (!Number.isFinite(n) || n < 0) problems.push(`--wait-for-load needs seconds >= 0, got ${value ?? 'nothing'}`);
        else opts.waitForLoadMs = n * 1000;
        break;
      }
      case '--max-load': {
        const n = Number(take());
        if (!Number.isFinite(n) || n <= 0) problems.push(`--max-load needs a number > 0, got ${value ?? 'nothing'}`);
        else opts.maxLoad = n;
        break;
      }
      case '--keep-logs':
        opts.keepLogs = true;
        break;
      case '--redis-monitor':
        opts.redisMonitor = true;
        break;
      default:
        problems.push(`unknown option ${flag}`);
    }
  }
  if (huge.nodes < 4) problems.push('--huge-nodes must be at least 4 (the tiny volumes live on four nodes with node agents)');
  if (huge.pods < huge.namespaces) problems.push('--huge-pods must be at least --huge-namespaces');
  if (fs.bytesPerVolume < 1) problems.push('--bytes must be at least 1 byte (the fs-backup scenario copies real data)');
  if (fs.bandwidthBytesPerSec < 1024) problems.push('--bandwidth must be at least 1KiB/s');
  return problems.length > 0 ? { ok: false, problems } : { ok: true, options: opts };
}
