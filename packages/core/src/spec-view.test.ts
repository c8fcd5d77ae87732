import { describe, expect, it } from 'vitest';
import { validateBackupRequest } from './backup-spec.schema.js';
import { specForDisplay } from './spec-view.js';

describe('specForDisplay', () => {
  it('shows the default durations of a validated spec in Velero form', () => {
    const validated = validateBackupRequest({ spec: {} });
    if (!validated.ok) throw new Error(JSON.stringify(validated.problems));
    const shown = specForDisplay(validated.value) as Record<string, unknown>;
    expect(shown.fsBackupTimeout).toBe('4h0m0s');
    expect(shown.ttl).toBe('720h0m0s');
    expect(shown).not.toHaveProperty('fsBackupTimeoutMs');
    expect(shown).not.toHaveProperty('ttlMs');
  });

  it('shows durations as submitted, hook timeouts included, and leaves other fields alone', () => {
    const validated = validateBackupRequest({
      spec: {
        ttl: '24h',
        fsBackupTimeout: '90m',
        includedNamespaces: ['shop'],
        hooks: { resources: [{ name: 'db', pre: [{ exec: { command: ['sync'], timeout: '45s' } }] }] },
      },
    });
    if (!validated.ok) throw new Error(JSON.stringify(validated.problems));
    const shown = specForDisplay(validated.value) as {
      ttl: string;
      fsBackupTimeout: string;
      includedNamespaces: string[];
      hooks: { resources: Array<{ pre: Array<{ exec: Record<string, unknown> }> }> };
    };
    expect(shown.ttl).toBe('24h0m0s');
    expect(shown.fsBackupTimeout).toBe('1h30m0s');
    expect(shown.includedNamespaces).toEqual(['shop']);
    expect(shown.hooks.resources[0]?.pre[0]?.exec).toMatchObject({ command: ['sync'], timeout: '45s' });
    expect(shown.hooks.resources[0]?.pre[0]?.exec).not.toHaveProperty('timeoutMs');
  });
});
