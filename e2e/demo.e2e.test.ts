import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DemoRun, runDemo } from './support/demo-run.js';

/*
 * `pnpm demo --json` for real: a private redis-server, the simulator, three node agents, two
 * workers and the API as separate processes, one backup through the REST API. The demo runs
 * with its own TMPDIR and a marker in its environment, so "nothing left behind" is checked
 * exactly: no process carrying the marker, no entry left in that TMPDIR.
 */

interface DemoSummary {
  ok: boolean;
  phase: string;
  backup: string;
  items: { total: number; backedUp: number };
  pvbs: { total: number; byPhase: Record<string, number>; bytes: number };
  hooks: { attempted: number; failed: number; runs: Array<{ phase: string; exitCode: number | null }> };
  postHookLags: Array<{ pod: string; blockPvbs: number; lagMs: number | null }>;
  storage: { kept: boolean; dir: string; backupDir: string };
  repositoryVerify: { ok: boolean; chunksChecked: number } | null;
  dashboard: { url: string };
  api: { token: string };
  processes: Array<{ name: string; pid: number; identity: string }>;
  restore: {
    phase: string;
    objects: { total: number; failed: number };
    volumes: Array<{ pod: string; volume: string; files: number; equal: boolean }>;
  } | null;
  cleanup: { processesStopped: boolean; tempRemoved: boolean } | null;
}

async function processesWithMarker(marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = await readFile(`/proc/${entry}/environ`, 'latin1');
      if (environ.includes(marker)) found.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

// The same run with backups in a directory and with --storage s3 (a private S3 server).
describe.each([
  ['directory', []],
  ['s3', ['--storage', 's3']],
] as const)('pnpm demo --json, storage %s', (storage, storageArgs) => {
  let tmp: string;
  const marker = `STOWAGE_E2E_MARKER=${randomUUID()}`;
  let run: DemoRun;

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'stowage-e2e-demo-'));
    const [key, value] = marker.split('=') as [string, string];
    run = await runDemo(storageArgs, { [key]: value, TMPDIR: tmp });
  }, 450_000);

  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('ends with a Completed backup, exit 0 and a summary with PVBs, hooks and post-hook lags', () => {
    expect(run.code, run.stderr).toBe(0);
    const s = JSON.parse(run.stdout) as DemoSummary;
    expect(s.ok).toBe(true);
    expect(s.phase).toBe('Completed');
    expect(s.items.total).toBeGreaterThan(0);
    expect(s.items.backedUp).toBe(s.items.total);
    expect(s.pvbs.total).toBeGreaterThan(0);
    expect(s.pvbs.byPhase.Completed).toBe(s.pvbs.total);
    expect(s.pvbs.bytes).toBeGreaterThan(0);
    expect(s.hooks.failed).toBe(0);
    expect(s.hooks.runs.map((r) => r.phase).sort()).toEqual(['post', 'pre']); // the postgres freeze/thaw pair
    expect(s.postHookLags.length).toBeGreaterThan(0);
    for (const lag of s.postHookLags) {
      expect(lag.blockPvbs, lag.pod).toBeGreaterThan(0);
      expect(lag.lagMs, lag.pod).not.toBeNull();
      expect(lag.lagMs!, lag.pod).toBeGreaterThanOrEqual(0);
    }
    expect(s.repositoryVerify).toMatchObject({ ok: true });
    expect(s.dashboard.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/admin\/queues$/);
    expect(s.api.token.length).toBeGreaterThanOrEqual(32);
    // Three node agents, two backup workers, a restore worker and the API ran as separate processes.
    expect(s.processes.map((p) => p.name).sort()).toEqual([
      'agent-node-a',
      'agent-node-b',
      'agent-node-c',
      'api',
      'restorer-1',
      'worker-1',
      'worker-2',
    ]);
    expect(new Set(s.processes.map((p) => p.pid)).size).toBe(7);
    // Each ran as the dev overlay's account of its kind, as the simulator (SelfSubjectReview) says.
    const identities = Object.fromEntries(s.processes.map((p) => [p.name, p.identity]));
    expect(identities).toEqual({
      'agent-node-a': 'system:serviceaccount:stowage:stowage-node-agent',
      'agent-node-b': 'system:serviceaccount:stowage:stowage-node-agent',
      'agent-node-c': 'system:serviceaccount:stowage:stowage-node-agent',
      api: 'system:serviceaccount:stowage:stowage-api',
      'restorer-1': 'system:serviceaccount:stowage:stowage-restorer',
      'worker-1': 'system:serviceaccount:stowage:stowage-worker',
      'worker-2': 'system:serviceaccount:stowage:stowage-worker',
    });
    // The restore of shop after it: every object back, every volume's files equal to the backed-up ones.
    expect(s.restore?.phase).toBe('Completed');
    expect(s.restore?.objects.failed).toBe(0);
    expect(s.restore?.objects.total).toBeGreaterThan(0);
    expect(s.restore?.volumes.length).toBeGreaterThan(0);
    for (const v of s.restore?.volumes ?? []) expect(v.equal, `${v.pod} ${v.volume}`).toBe(true);
    expect(s.storage.kept).toBe(false);
    if (storage === 's3') {
      expect(s.storage.dir).toMatch(/^s3:\/\/stowage-demo at http:\/\/127\.0\.0\.1:\d+ /);
      expect(s.storage.backupDir).toBe(`s3://stowage-demo/backups/${s.backup}/`);
    }
    expect(s.cleanup).toEqual({ processesStopped: true, tempRemoved: true });
  });

  it('leaves no process and no temp dir behind', async () => {
    const s = JSON.parse(run.stdout) as DemoSummary;
    for (const p of s.processes) expect(alive(p.pid), `${p.name} (pid ${p.pid})`).toBe(false);
    expect(await processesWithMarker(marker)).toEqual([]);
    // tsx keeps its compile cache in TMPDIR (tsx-<uid>); everything else must be gone.
    const left = (await readdir(tmp)).filter((e) => !e.startsWith('tsx-'));
    expect(left).toEqual([]);
  });
});
