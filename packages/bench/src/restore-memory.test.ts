import { describe, expect, it } from 'vitest';
import { backupEntries, DEFAULT_BASELINE, parseRestoreMemoryArgs, restoreMemoryTargets } from './restore-memory.js';

describe('restore-memory scenario: options', () => {
  it('defaults to a 300k-object backup in 300 namespaces against the baseline commit', () => {
    expect(parseRestoreMemoryArgs(['--scenario', 'restore-memory'])).toEqual({
      ok: true,
      options: {
        objects: 300_000,
        namespaces: 300,
        baseline: DEFAULT_BASELINE,
        cappedHeapMb: 160,
        json: undefined,
        markdown: undefined,
        keepLogs: false,
      },
    });
  });

  it('reports every bad option at once, naming it', () => {
    const parsed = parseRestoreMemoryArgs(['--objects', '0', '--namespaces', 'x', '--json', '--bogus']);
    expect(parsed.ok).toBe(false);
    if (parsed.ok !== false) return;
    expect(parsed.problems).toEqual([
      '--objects must be a whole number >= 1, got "0"',
      '--namespaces must be a whole number >= 1, got "x"',
      '--json needs a value',
      'unknown option "--bogus"',
    ]);
  });
});

describe('restore-memory scenario: the generated backup', () => {
  it('holds exactly the asked objects, each a JSON object at a Velero item path of its namespace', () => {
    const entries = [...backupEntries(1_003, 7)];
    expect(entries).toHaveLength(1_003);
    const namespaces = new Set<string>();
    for (const e of entries) {
      const m = /^resources\/([^/]+)\/(?:namespaces\/([^/]+)|cluster)\/([^/]+)\.json$/.exec(e.path);
      expect(m, e.path).not.toBeNull();
      const object = JSON.parse(e.data.toString('utf8')) as { metadata: { name: string; namespace?: string } };
      expect(object.metadata.name).toBe(m?.[3]);
      if (m?.[2]) expect(object.metadata.namespace).toBe(m[2]);
      else namespaces.add(object.metadata.name);
    }
    expect(namespaces.size).toBe(7);
  });
});

describe('restore-memory scenario: targets', () => {
  it('judges the one-namespace RSS ratio and the Redis transient', () => {
    const run = (restore: 'one namespace' | 'full', code: 'baseline' | 'this tree', peakRssBytes: number, transient: number) => ({
      restore,
      code,
      peakRssBytes,
      redisBeforeBytes: 0,
      redisStoredBytes: 0,
      redisTransientBytes: transient,
    });
    const targets = restoreMemoryTargets({
      objects: 1,
      namespaces: 1,
      baseline: 'a',
      thisTree: 'b',
      tarballBytes: 1,
      runs: [run('one namespace', 'baseline', 1000, 5e6), run('one namespace', 'this tree', 150, 1e6), run('full', 'this tree', 900, 3e6)],
    });
    expect(targets.oneNamespaceRssRatio).toEqual({ value: 0.15, met: true });
    expect(targets.transientBytes).toEqual({ value: 3e6, met: false });
  });
});
