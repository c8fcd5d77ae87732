import { describe, expect, it } from 'vitest';
import { assertPathSegment, assertValidKey, assertValidPrefix } from './keys.js';

describe('key validation', () => {
  it.each([
    ['', /must not be empty/],
    ['/etc/passwd', /is absolute/],
    ['backups/../../etc', /'\.\.' segment/],
    ['backups/./x', /'\.' segment/],
    ['backups//x', /empty segment/],
    ['backups/x/', /empty segment/],
    ['a\\b', /use '\/'/],
    ['a\0b', /NUL/],
    ['backups/.stowage-tmp-123', /reserved/],
    ['x'.repeat(1025), /longer than 1024 bytes/],
  ])('rejects %j with STORAGE_BAD_KEY', (key, reason) => {
    expect(() => assertValidKey(key)).toThrow(/^STORAGE_BAD_KEY: /);
    expect(() => assertValidKey(key)).toThrow(reason);
  });

  it('accepts ordinary keys, including names with colons', () => {
    expect(() => assertValidKey('backups/b1/items/clusterroles.rbac.authorization.k8s.io/cluster/system:admin.json')).not.toThrow();
  });

  it('allows the empty prefix and a trailing slash on prefixes only', () => {
    expect(() => assertValidPrefix('')).not.toThrow();
    expect(() => assertValidPrefix('backups/b1/')).not.toThrow();
    expect(() => assertValidPrefix('../')).toThrow(/STORAGE_BAD_KEY/);
  });

  it('refuses path-like names as a single segment', () => {
    for (const bad of ['', '.', '..', 'a/b']) expect(() => assertPathSegment('backup name', bad)).toThrow(/^STORAGE_BAD_NAME: backup name/);
  });
});
