import { describe, expect, it } from 'vitest';
import { paxRecord, TAR_CHUNK_BYTES, TAR_END_OF_ARCHIVE, tarEntryBlocks, writeTar } from './tar-writer.js';

describe('tar writer', () => {
  it('pax records count their own length, also across a digit boundary', () => {
    for (const valueLength of [1, 85, 86, 87, 88, 89, 90, 991, 992, 993, 994, 995, 996]) {
      const record = paxRecord('path', 'a'.repeat(valueLength));
      const declared = Number(record.toString('utf8').split(' ')[0]);
      expect(declared).toBe(record.length);
    }
  });

  it('writes a valid ustar header checksum', () => {
    const [header] = tarEntryBlocks({ path: 'metadata/version', data: Buffer.from('1.1.0\n') }, { mtime: new Date(0) });
    if (!header) throw new Error('no header');
    const stored = Number.parseInt(header.subarray(148, 154).toString('latin1'), 8);
    const copy = Buffer.from(header);
    copy.fill(0x20, 148, 156);
    expect(stored).toBe(copy.reduce((sum, byte) => sum + byte, 0));
    expect(header.subarray(257, 263).toString('latin1')).toBe('ustar\0');
    expect(header.subarray(100, 107).toString('latin1')).toBe('0000755');
  });

  it('puts a long or non-ASCII path in a pax header', () => {
    const long = `resources/${'x'.repeat(120)}.json`;
    const blocks = tarEntryBlocks({ path: long, data: Buffer.from('{}') }, { mtime: new Date(0) });
    expect(blocks[0]?.[156]).toBe('x'.charCodeAt(0));
    expect(blocks[1]?.toString('utf8')).toContain(`path=${long}\n`);
    const unicode = tarEntryBlocks({ path: 'resources/configmaps/namespaces/ns/é.json', data: Buffer.from('{}') }, { mtime: new Date(0) });
    expect(unicode[0]?.[156]).toBe('x'.charCodeAt(0));
  });

  it('streams the archive in large chunks with the same bytes as its entries one by one', async () => {
    const opts = { mtime: new Date(0) };
    const entries = Array.from({ length: 3_000 }, (_, i) => ({
      path: `resources/pods/namespaces/ns/app-${i}.json`,
      data: Buffer.from(`{"i":${i}}`),
    }));
    const chunks: Buffer[] = [];
    for await (const chunk of writeTar(entries, opts)) chunks.push(chunk);
    const expected = Buffer.concat([...entries.flatMap((e) => tarEntryBlocks(e, opts)), TAR_END_OF_ARCHIVE]);
    expect(Buffer.concat(chunks).equals(expected)).toBe(true);
    // ~1.5 MiB of blocks: a handful of writes for the gzip stream, not 9,000.
    expect(chunks.length).toBeLessThanOrEqual(Math.ceil(expected.length / TAR_CHUNK_BYTES) + 1);
    expect(chunks.slice(0, -1).every((c) => c.length >= TAR_CHUNK_BYTES)).toBe(true);
  });
});
