import { describe, expect, it } from 'vitest';
import type { StowageApiClient } from './api-client.js';
import type { BackupEvent } from './api-types.js';
import { restoreProgressLine, runRestoreCommand } from './restore-command.js';

const ev = (type: string, data: Record<string, unknown>): BackupEvent => ({ id: '1-0', type, at: '2026-01-01T00:00:00Z', data });

describe('restoreProgressLine: a PVR that ended', () => {
  const totals = { items: 0, done: 0 };
  it('Completed: the volume and its phase', () => {
    expect(restoreProgressLine(ev('pvr.phase', { pod: 'shop/cache', volume: 'redis-data', to: 'Completed' }), totals)).toBe(
      'volume shop/cache redis-data: Completed',
    );
  });

  it('Failed: says why, from the PVR status message on the event', () => {
    expect(
      restoreProgressLine(ev('pvr.phase', { pod: 'shop/reporter', volume: 'reports', to: 'Failed', message: 'the disk is full' }), totals),
    ).toBe('volume shop/reporter reports: Failed (the disk is full)');
  });

  it('still running: no line', () => {
    expect(restoreProgressLine(ev('pvr.phase', { pod: 'shop/reporter', volume: 'reports', to: 'InProgress' }), totals)).toBeUndefined();
  });
});

describe('restore create: the flags become the spec', () => {
  it('selection flags as backup create has them, the restore flags, the file spec under them', async () => {
    const requests: unknown[] = [];
    // Only the one call restore create makes without --wait.
    const client = {
      createRestore: async (req: { name?: string; spec: Record<string, unknown> }) => {
        requests.push(req);
        return { name: req.name, backupName: req.spec.backupName };
      },
    } as unknown as StowageApiClient;
    const written: string[] = [];
    const io = { stdout: { write: (t: string) => void written.push(t) }, stderr: { write: () => undefined } };
    const file = JSON.stringify({ name: 'from-file', spec: { includedNamespaces: ['file-ns'], restorePVs: true } });
    const code = await runRestoreCommand(
      [
        'create',
        '--from-backup',
        'nightly',
        '-f',
        '-',
        '--exclude-namespaces',
        'kube-system, tmp',
        '--include-resources',
        'pods',
        '--exclude-resources',
        'secrets',
        '-l',
        'app=web,tier!=db',
        '--include-cluster-resources=false',
        '--namespace-mappings',
        'a:b',
        '--restore-volumes=false',
      ],
      () => client,
      { ...io, readStdin: async () => file },
    );
    expect(code).toBe(0);
    expect(requests).toEqual([
      {
        name: 'from-file',
        spec: {
          includedNamespaces: ['file-ns'],
          restorePVs: false,
          backupName: 'nightly',
          excludedNamespaces: ['kube-system', 'tmp'],
          includedResources: ['pods'],
          excludedResources: ['secrets'],
          labelSelector: { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['db'] }] },
          includeClusterResources: false,
          namespaceMapping: { a: 'b' },
        },
      },
    ]);
    expect(Object.keys((requests[0] as { spec: object }).spec)).toEqual([
      'includedNamespaces',
      'restorePVs',
      'backupName',
      'excludedNamespaces',
      'includedResources',
      'excludedResources',
      'labelSelector',
      'includeClusterResources',
      'namespaceMapping',
    ]);
    await expect(runRestoreCommand(['create', '--ttl', '1h'], () => client, io)).rejects.toThrow('restore create: unknown flag --ttl');
    await expect(runRestoreCommand(['nope'], () => client, io)).rejects.toThrow(
      'unknown restore command "nope"; see "stowage restore --help"',
    );
    await expect(runRestoreCommand(['list', '--limit', '0'], () => client, io)).rejects.toThrow(
      'restore list: flag --limit must be a whole number from 1 to 1000, got "0"',
    );
    expect(await runRestoreCommand([], () => client, io)).toBe(2);
    expect(written.at(-1)).toContain('restore create [NAME]');
  });
});
