import { describe, expect, it } from 'vitest';
import { paxRecord, tarEntryBlocks } from './tar-writer.js';

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
});
