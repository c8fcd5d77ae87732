import { parseByteRate } from '@stowage/node-agent';
import { FREEZE_MODES, FREEZE_SCENARIO, type FreezeMode, type FreezeScenario } from './freeze-run.js';
import { parseScenarioArgs, type ScenarioBenchOptions, type ScenarioParseResult } from './scenario-options.js';

export type FreezeBenchOptions = ScenarioBenchOptions<FreezeScenario>;

export const FREEZE_USAGE = `pnpm bench --scenario freeze [options]

  The freeze window (pre hook start → post hook end, simulator exec log) and the total backup time
  of pods backed up by fs-backup and by CSI snapshots with their data moved (snapshotMoveData),
  side by side: each round runs both modes, each in a fresh environment, the order alternating.

  --pods N                    pods, one PVC volume and a pre and post hook each (default 20)
  --bytes S / --files F       per volume (default 256MiB / 4)
  --nodes N                   nodes, one node agent each (default 20: a pod per node)
  --load-concurrency K        node agent loadConcurrency (default 1)
  --bandwidth L               per node agent bandwidth limit (e.g. 64MiB/s; default none)
  --workers W                 worker processes (default 2)
  --block-concurrency C       STOWAGE_BLOCK_CONCURRENCY per worker (default 2)
  --hook-concurrency H        STOWAGE_HOOK_CONCURRENCY per worker (default 16)
  --pre-hook-ms MS / --post-hook-ms MS   scripted hook durations (default 100 / 20)
  --ready-delay-ms MS         the snapshot class's cut → readyToUse delay (default 0)
  --agents-per-process M      node agents hosted per process (default 10)
  --rounds R                  rounds of both modes, order alternating (default 2)
  --modes fs-backup,snapshot  the modes of each round (default both)
  --json FILE                 write the results as JSON
  --markdown FILE             write the printed report to FILE as well (replacing it)
  --keep-logs                 keep the child processes' logs (printed path)
  -h, --help`;

const INT_FLAGS: Record<string, { key: keyof FreezeScenario; min: number }> = {
  '--pods': { key: 'pods', min: 1 },
  '--files': { key: 'filesPerVolume', min: 1 },
  '--nodes': { key: 'nodes', min: 1 },
  '--load-concurrency': { key: 'loadConcurrency', min: 1 },
  '--workers': { key: 'workers', min: 1 },
  '--block-concurrency': { key: 'blockConcurrency', min: 1 },
  '--hook-concurrency': { key: 'hookConcurrency', min: 1 },
  '--pre-hook-ms': { key: 'preHookMs', min: 0 },
  '--post-hook-ms': { key: 'postHookMs', min: 0 },
  '--ready-delay-ms': { key: 'readyDelayMs', min: 0 },
  '--agents-per-process': { key: 'agentsPerProcess', min: 1 },
  '--rounds': { key: 'rounds', min: 1 },
};

export type FreezeParseResult = ScenarioParseResult<FreezeBenchOptions>;

/** Parses argv (after the script name, with `--scenario freeze` anywhere); every problem is reported at once. */
export function parseFreezeBenchArgs(argv: readonly string[]): FreezeParseResult {
  const scenario: FreezeScenario = { ...FREEZE_SCENARIO, modes: [...FREEZE_SCENARIO.modes] };
  return parseScenarioArgs(argv, {
    name: 'freeze',
    options: { scenario, json: undefined, markdown: undefined, keepLogs: false },
    intFlags: INT_FLAGS,
    parseFlag(flag, next, problems) {
      switch (flag) {
        case '--bytes':
        case '--bandwidth': {
          const v = next();
          const parsed = v === undefined ? undefined : parseByteRate(v);
          if (!parsed?.ok || parsed.bytesPerSec < 1)
            problems.push(`${flag} needs a byte ${flag === '--bytes' ? 'size like 256MiB' : 'rate like 64MiB/s'}, got ${v ?? 'nothing'}`);
          else if (flag === '--bytes') scenario.bytesPerVolume = Math.round(parsed.bytesPerSec);
          else scenario.bandwidthBytesPerSec = Math.round(parsed.bytesPerSec);
          return true;
        }
        case '--modes': {
          const v = next() ?? '';
          const modes = v.split(',').filter(Boolean);
          const bad = modes.filter((m) => !FREEZE_MODES.includes(m as FreezeMode));
          if (modes.length === 0 || bad.length > 0) problems.push(`--modes takes fs-backup and/or snapshot, got ${v || 'nothing'}`);
          else scenario.modes = [...new Set(modes as FreezeMode[])];
          return true;
        }
        default:
          return false;
      }
    },
  });
}
