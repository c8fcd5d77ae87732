import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKubeClients, execInPod, type KubeClients } from '../src/index.js';
import { pvbCrdFile, smallCluster, waitFor } from './sim-fixture.js';

let sim: Simulator;
let kube: KubeClients;
const bigOutput = `${'x'.repeat(10_000)}THE-END`;

beforeAll(async () => {
  sim = await startSimulator({ fixture: smallCluster(), extraManifests: [pvbCrdFile] });
  kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
  sim.setExecBehaviour('apps', 'db', {
    main: {
      rules: [
        { command: ['fsfreeze', '--freeze', '/data'], exitCode: 0, stdout: 'frozen\n' },
        { command: ['pg_ctl', 'check'], exitCode: 3, stdout: 'checking\n', stderr: 'database is corrupt\n' },
        { command: ['sleep', '30'], durationMs: 30_000, exitCode: 0 },
        { command: ['dump'], exitCode: 0, stdout: bigOutput },
      ],
      default: { exitCode: 0 },
    },
  });
});

afterAll(async () => {
  await sim?.close();
});

const target = { namespace: 'apps', pod: 'db', container: 'main' };

describe('execInPod', () => {
  it('returns exit code 0 with the output', async () => {
    const result = await execInPod(kube, { ...target, command: ['fsfreeze', '--freeze', '/data'], timeoutMs: 5000 });
    expect(result).toMatchObject({ outcome: 'exited', exitCode: 0, stdoutTail: 'frozen\n', stderrTail: '' });
    expect(Date.parse(result.endedAt)).toBeGreaterThanOrEqual(Date.parse(result.startedAt));
    const [record] = sim.execLog({ namespace: 'apps', pod: 'db' }).filter((r) => r.command[0] === 'fsfreeze');
    expect(record).toMatchObject({ container: 'main', command: ['fsfreeze', '--freeze', '/data'], exitCode: 0, aborted: false });
  });

  it('returns a non-zero exit code with stderr', async () => {
    const result = await execInPod(kube, { ...target, command: ['pg_ctl', 'check'], timeoutMs: 5000 });
    expect(result).toMatchObject({ outcome: 'exited', exitCode: 3, stdoutTail: 'checking\n', stderrTail: 'database is corrupt\n' });
  });

  it('times out, closes the socket, and the server sees the client leave', async () => {
    const before = Date.now();
    const result = await execInPod(kube, { ...target, command: ['sleep', '30'], timeoutMs: 300 });
    expect(result.outcome).toBe('timeout');
    if (result.outcome === 'timeout') expect(result.message).toContain('timed out after 300 ms');
    expect(result.durationMs).toBeGreaterThanOrEqual(290);
    // Bounded by the timeout, not by the 30 s command.
    expect(Date.now() - before).toBeLessThan(10_000);
    const record = await waitFor('the exec log to show the disconnect', () =>
      sim.execLog({ namespace: 'apps', pod: 'db' }).find((r) => r.command[0] === 'sleep' && r.aborted),
    );
    expect(record.exitCode).toBeNull();
    expect(record.endedAt).not.toBeNull();
  });

  it('keeps only the last 4 KiB of a large output', async () => {
    const result = await execInPod(kube, { ...target, command: ['dump'], timeoutMs: 5000 });
    expect(result.outcome).toBe('exited');
    expect(result.stdoutTail).toHaveLength(4096);
    expect(result.stdoutTail.endsWith('xxxTHE-END')).toBe(true);
  });

  it('stops when the caller aborts', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const result = await execInPod(kube, { ...target, command: ['sleep', '30'], timeoutMs: 10_000, signal: controller.signal });
    expect(result).toMatchObject({ outcome: 'error', reason: 'aborted' });
  });

  it('reports a missing pod as a connect failure, not a hang', async () => {
    const result = await execInPod(kube, { namespace: 'apps', pod: 'ghost', container: 'main', command: ['true'], timeoutMs: 5000 });
    expect(result).toMatchObject({ outcome: 'error', reason: 'connect-failed' });
    if (result.outcome === 'error') expect(result.message).toContain('404');
  });

  it('retries an upgrade answered 429/503, because the command never started', async () => {
    sim.setFaults({ errorRate: 1, statuses: [503], appliesTo: { resources: ['pods/exec'] } });
    const calm = setTimeout(() => sim.clearFaults(), 300);
    try {
      const result = await execInPod(kube, { ...target, command: ['fsfreeze', '--freeze', '/data'], timeoutMs: 10_000 });
      expect(result).toMatchObject({ outcome: 'exited', exitCode: 0 });
    } finally {
      clearTimeout(calm);
      sim.clearFaults();
    }
    expect(sim.requests().faulted['503']).toBeGreaterThanOrEqual(1);
    expect(kube.retryStats.retriesByReason['exec-connect']).toBeGreaterThanOrEqual(1);
  });

  it('rejects an empty command and a non-positive timeout', () => {
    expect(() => execInPod(kube, { ...target, command: [], timeoutMs: 1000 })).toThrow(
      expect.objectContaining({ code: 'KUBE_BAD_ARGUMENT' }),
    );
    expect(() => execInPod(kube, { ...target, command: ['true'], timeoutMs: 0 })).toThrow(
      expect.objectContaining({ code: 'KUBE_BAD_ARGUMENT' }),
    );
  });
});
