import { parseByteRate } from '@stowage/node-agent';
import { RESTORE_SCENARIO, type RestoreScenario } from './restore-run.js';
import { parseScenarioArgs, type ScenarioBenchOptions, type ScenarioParseResult } from './scenario-options.js';

export interface RestoreBenchOptions extends ScenarioBenchOptions<RestoreScenario> {
  /** `all` (the benchmark) or `pods`: only the parallel pods restore (hook lag), on a backup of the pod namespaces. */
  part: RestorePart;
}

export type RestorePart = 'all' | 'pods';

export const RESTORE_USAGE = `pnpm bench --scenario restore [options]

  Restores a backup of plain objects and of pods with volumes, with W workers, in the parallel
  mode (STOWAGE_RESTORE_MAX_INFLIGHT=--max-inflight) and one item at a time (=1), side by side.

  --plain-namespaces N        namespaces of plain objects (default 20)
  --secrets N / --configmaps N   per plain namespace (default 500 / 500)
  --serial-namespaces N       plain namespaces the one-at-a-time mode restores (default 2)
  --pods N                    pods with one PVC volume and a post-restore hook each (default 200)
  --bytes S / --files F       per volume (default 64KiB / 2)
  --nodes N                   nodes, one node agent each (default 20)
  --workers W                 worker processes (default 2)
  --items-concurrency C       STOWAGE_RESTORE_ITEMS_CONCURRENCY per worker (default 8)
  --max-inflight M            STOWAGE_RESTORE_MAX_INFLIGHT of the parallel mode (default 100)
  --latency-ms L              added by the simulator to every API request (default 10)
  --pods-repeat R             the parallel mode's pods restore R times, each into namespaces of
                              its own; the hook lag's p99 is then pooled over the R restores
                              (one restore's p99 is its second-slowest hook) (default 1)
  --json FILE                 write the results as JSON
  --markdown FILE             write the printed report to FILE as well (replacing it)
  --no-markdown               no file (the default; older commands pass it)
  --keep-logs                 keep the child processes' logs (printed path)
  --restore-part all|pods     all (default) or only the parallel mode's pods restore (hook lag;
                              backs up only the pod namespaces, warms up on one of them)
  -h, --help`;

const INT_FLAGS: Record<string, { key: keyof RestoreScenario; min: number }> = {
  '--plain-namespaces': { key: 'plainNamespaces', min: 1 },
  '--secrets': { key: 'secretsPerNamespace', min: 0 },
  '--configmaps': { key: 'configMapsPerNamespace', min: 0 },
  '--serial-namespaces': { key: 'serialPlainNamespaces', min: 1 },
  '--pods': { key: 'pods', min: 1 },
  '--files': { key: 'filesPerVolume', min: 1 },
  '--nodes': { key: 'nodes', min: 1 },
  '--workers': { key: 'workers', min: 1 },
  '--items-concurrency': { key: 'itemsConcurrency', min: 1 },
  '--max-inflight': { key: 'maxInFlight', min: 1 },
  '--latency-ms': { key: 'latencyMs', min: 0 },
  '--pods-repeat': { key: 'podsRepeat', min: 1 },
};

export type RestoreParseResult = ScenarioParseResult<RestoreBenchOptions>;

/** Parses argv (after the script name, with `--scenario restore` anywhere); every problem is reported at once. */
export function parseRestoreBenchArgs(argv: readonly string[]): RestoreParseResult {
  const scenario: RestoreScenario = { ...RESTORE_SCENARIO };
  const opts: RestoreBenchOptions = { scenario, json: undefined, markdown: undefined, keepLogs: false, part: 'all' };
  return parseScenarioArgs(argv, {
    name: 'restore',
    options: opts,
    intFlags: INT_FLAGS,
    parseFlag(flag, next, problems) {
      switch (flag) {
        case '--bytes': {
          const v = next();
          const parsed = v === undefined ? undefined : parseByteRate(v);
          if (!parsed?.ok || parsed.bytesPerSec < 1) problems.push(`--bytes needs a byte size like 64KiB, got ${v ?? 'nothing'}`);
          else scenario.bytesPerVolume = Math.round(parsed.bytesPerSec);
          return true;
        }
        case '--restore-part': {
          const v = next();
          if (v !== 'all' && v !== 'pods') problems.push(`--restore-part needs all or pods, got ${v ?? 'nothing'}`);
          else opts.part = v;
          return true;
        }
        case '--no-markdown':
          opts.markdown = undefined;
          return true;
        default:
          return false;
      }
    },
    check(problems) {
      if (scenario.serialPlainNamespaces > scenario.plainNamespaces)
        problems.push(
          `--serial-namespaces (${scenario.serialPlainNamespaces}) must not exceed --plain-namespaces (${scenario.plainNamespaces})`,
        );
    },
  });
}
