import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './bench-env.js';
import {
  backupEntries,
  bundleForNode,
  DEFAULT_BASELINE,
  PLAN_CHILD,
  type PlanRun,
  parseRestoreMemoryArgs,
  type RestoreMemoryResult,
  renderRestoreMemoryMarkdown,
  restoreMemoryTargets,
} from './restore-memory.js';

const MiB = 1024 * 1024;

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

describe('restore-memory scenario: targets and report', () => {
  const run = (
    restore: 'one namespace' | 'full',
    code: 'baseline' | 'this tree',
    peakRssBytes: number,
    transient: number,
    planProcess?: { heapMb: number; peakRssBytes: number },
  ): PlanRun => ({
    restore,
    code,
    items: 10,
    skipped: 0,
    peakRssBytes,
    ...(planProcess ? { planHeapMb: planProcess.heapMb, planProcessPeakRssBytes: planProcess.peakRssBytes } : {}),
    redisBeforeBytes: 0,
    redisStoredBytes: 0,
    redisTransientBytes: transient,
  });
  const result: RestoreMemoryResult = {
    objects: 1,
    namespaces: 1,
    baseline: 'a',
    thisTree: 'b',
    tarballBytes: 1,
    runs: [
      run('one namespace', 'baseline', 1000 * MiB, 5e6),
      run('one namespace', 'this tree', 800 * MiB, 1e6, { heapMb: 256, peakRssBytes: 150 * MiB }),
      run('full', 'this tree', 900 * MiB, 3e6, { heapMb: 4096, peakRssBytes: 2000 * MiB }),
    ],
  };

  it("judges the one-namespace ratio where each plan ran (this tree's plan process against the baseline's process) and the Redis transient", () => {
    const targets = restoreMemoryTargets(result);
    expect(targets.oneNamespaceRssRatio).toEqual({
      value: 0.15,
      met: true,
      baselineBytes: 1000 * MiB,
      thisTreeBytes: 150 * MiB,
      thisTreeHostingBytes: 800 * MiB,
    });
    expect(targets.transientBytes).toEqual({ value: 3e6, met: false });
  });

  it("shows this tree's process hosting the restores queue beside its plan process, and each plan's heap cap", () => {
    const markdown = renderRestoreMemoryMarkdown(result, 'pnpm bench', 'now');
    const row = (prefix: string) => markdown.split('\n').find((l) => l.startsWith(prefix));
    expect(row('| one namespace | baseline (a) |')).toBe(
      "| one namespace | baseline (a) | Node's default | 10 / 0 | – | – | **1000.0 MiB** | – (planned in the hosting process) | 0.0 MiB | 4.8 MiB |",
    );
    expect(row('| one namespace | this tree (b) |')).toBe(
      '| one namespace | this tree (b) | 256 MiB, plan process | 10 / 0 | – | – | 800.0 MiB | **150.0 MiB** | 0.0 MiB | 1.0 MiB |',
    );
    expect(row('| full | this tree (b) |')).toContain('| 4096 MiB, plan process |');
    expect(markdown).toContain(
      "this tree ÷ baseline: 150.0 MiB ÷ 1000.0 MiB = 0.150 (target ≤ 0.2: met); beside it, this tree's process hosting the restores queue peaked at 800.0 MiB.",
    );
  });
});

describe("the restore plan's own process", () => {
  it('loads no Redis client, Kubernetes client, S3 SDK or BullMQ: only core and the tarball reader (its memory floor)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stowage-plan-imports-'));
    try {
      const meta = await bundleForNode(REPO_ROOT, PLAN_CHILD, join(dir, 'restore-plan-child.js'));
      const thirdParty = new Set<string>();
      for (const output of Object.values(meta.outputs)) {
        for (const { path, external } of output.imports) {
          if (!external || path.startsWith('node:')) continue;
          // `/…/node_modules/.pnpm/<store entry>/node_modules/<package>/…` → the package's name.
          const match = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
          thirdParty.add(match?.[1] ?? path);
        }
      }
      expect([...thirdParty].sort()).toEqual(['cron-parser', 'zod']);
      const workspace = Object.keys(meta.inputs).filter((input) => input.includes('packages/') && !input.includes('node_modules'));
      expect(workspace.some((input) => input.includes('packages/kube/src/') && !input.endsWith('api-groups.ts'))).toBe(false);
      expect(workspace.some((input) => input.includes('packages/queue/'))).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
