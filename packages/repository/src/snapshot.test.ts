import { describe, expect, it } from 'vitest';
import { type SnapshotManifest, summaryOf, summaryOfManifestJson } from './snapshot.js';

const id = '0123456789abcdef0123456789abcdef';
const manifest: SnapshotManifest = {
  formatVersion: 1,
  id,
  time: '2026-12-04T12:00:00.000Z',
  durationMs: 1234,
  // Text that looks like the key the summary stops at, inside strings and as a tag name.
  source: '/data/"entries":[/vol',
  hostname: 'node-1',
  tags: { volume: 'data', entries: '"entries":[1]', pod: 'db-0 ✓' },
  parent: 'fedcba9876543210fedcba9876543210',
  totals: { files: 1, dirs: 1, symlinks: 0, bytes: 5 },
  entries: [
    { path: '.', type: 'dir', mode: 0o755, size: 0, mtimeMs: 1, uid: 0, gid: 0 },
    { path: '"entries":[', type: 'file', mode: 0o644, size: 5, mtimeMs: 2, uid: 0, gid: 0, ctimeMs: 3, ino: 4, chunks: ['ab'] },
  ],
};

describe('summaryOfManifestJson', () => {
  it('reads the summary of a manifest as written, without its file list, equal to the full parse', () => {
    const json = Buffer.from(JSON.stringify(manifest));
    expect(summaryOfManifestJson(json, id)).toEqual(summaryOf(manifest));
  });

  it('gives up (the caller parses everything) when entries is not last, the id differs, or the text is not a manifest', () => {
    const { entries, ...head } = manifest;
    expect(summaryOfManifestJson(Buffer.from(JSON.stringify({ entries, ...head })), id)).toBeUndefined();
    expect(summaryOfManifestJson(Buffer.from(JSON.stringify(manifest)), 'ffffffffffffffffffffffffffffffff')).toBeUndefined();
    expect(summaryOfManifestJson(Buffer.from('{"formatVersion":1,"entries":['), id)).toBeUndefined();
    expect(summaryOfManifestJson(Buffer.from('not json,"entries":[]}'), id)).toBeUndefined();
  });
});
