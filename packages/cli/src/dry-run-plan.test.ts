import { describe, expect, it } from 'vitest';
import { type DryRunPlan, formatDryRunPlan } from './dry-run-plan.js';

const empty: DryRunPlan = {
  name: 'p',
  dryRun: true,
  summary: { blocks: 0, items: 0, pods: 0, preHooks: 0, postHooks: 0, fsBackupVolumes: 0, skippedVolumes: 0, volumeErrors: 0 },
  estimate: { isEstimate: true, basis: 'provisioned sizes', totalBytes: 0, perNode: [] },
  backupHooks: { pre: [], post: [] },
  blocks: [],
  warnings: [],
  errors: [],
  notes: [],
};

describe('formatDryRunPlan', () => {
  it('says why a real run would fail validation, and nothing else', () => {
    expect(formatDryRunPlan({ ...empty, failedValidation: 'resource policy ConfigMap stowage/x cannot be read: not found' })).toEqual([
      'Dry run of backup "p": nothing was created, stored or executed.',
      'A real run would fail validation: resource policy ConfigMap stowage/x cannot be read: not found',
    ]);
  });

  it('shows pods with hooks and volumes in full, pod-free blocks on one line, sizes of unknown volumes as unknown, then warnings and errors', () => {
    const lines = formatDryRunPlan({
      ...empty,
      summary: { ...empty.summary, blocks: 2, items: 4, pods: 1, preHooks: 1, fsBackupVolumes: 1, volumeErrors: 1 },
      estimate: {
        isEstimate: true,
        basis: 'provisioned sizes',
        totalBytes: 0,
        perNode: [{ node: 'n1', volumes: 1, estimatedBytes: 0, volumesWithoutEstimate: 1 }],
      },
      blocks: [
        {
          id: 'b1',
          items: [{ key: 'pods/ns/p1', apiVersion: 'v1', kind: 'Pod', namespace: 'ns', name: 'p1' }],
          pods: [
            {
              namespace: 'ns',
              name: 'p1',
              node: 'n1',
              hooks: {
                pre: [{ container: 'c', command: ['/bin/true'], onError: 'Fail', timeoutMs: 1000, source: 'spec', hookName: 'h' }],
                post: [],
              },
            },
          ],
          volumes: [
            { pod: 'ns/p1', volume: 'cache', decision: 'fs-backup', estimatedBytes: null, estimateBasis: 'unknown' },
            { pod: 'ns/p1', volume: 'data', decision: 'error', reason: 'the PVC has no PV', claimName: 'd' },
          ],
          skips: [],
        },
        {
          id: 'b2',
          items: [{ key: 'configmaps/ns/a', apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name: 'a' }],
          pods: [],
          volumes: [],
          skips: [],
        },
      ],
      warnings: ['w1'],
      errors: ['pods/ns/p1 volume data not backed up: the PVC has no PV'],
    });
    expect(lines).toContain('  pod ns/p1 on n1');
    expect(lines).toContain('    pre hook (spec hook h) in c: ["/bin/true"] onError=Fail');
    expect(lines).toContain('    volume cache: fs-backup, size unknown');
    expect(lines).toContain('    volume data (PVC d): error — the PVC has no PV');
    expect(lines).toContain('block b2: 1 items (ConfigMap)');
    expect(lines).toContain('  n1: ~0 B in 1 volume(s), 1 of unknown size');
    expect(lines.slice(-2)).toEqual(['warning: w1', 'error: pods/ns/p1 volume data not backed up: the PVC has no PV']);
  });

  it('lists backup-level hooks with the pods they would run in, or why they would run nowhere', () => {
    const lines = formatDryRunPlan({
      ...empty,
      backupHooks: {
        pre: [
          {
            name: 'pause',
            namespace: 'gitops',
            command: ['flux', 'suspend'],
            onError: 'Fail',
            timeoutMs: 30_000,
            targets: [{ pod: 'flux-0', container: 'manager' }],
          },
        ],
        post: [
          {
            name: 'resume',
            namespace: 'gitops',
            command: ['flux', 'resume'],
            onError: 'Continue',
            timeoutMs: 30_000,
            targets: [],
            failure: 'no Running pod',
          },
        ],
      },
    });
    expect(lines).toContain('backup pre hook pause: ["flux","suspend"] onError=Fail in gitops/flux-0:manager');
    expect(lines).toContain('backup post hook resume: ["flux","resume"] onError=Continue runs nowhere: no Running pod');
  });
});
