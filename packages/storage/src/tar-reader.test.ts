import { describe, expect, it } from 'vitest';
import { readTar, type TarFile } from './tar-reader.js';
import { paxRecord, TAR_END_OF_ARCHIVE, type TarEntry, writeTar } from './tar-writer.js';

async function tarBytes(entries: TarEntry[]): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const chunk of writeTar(entries, { mtime: new Date(0) })) out.push(chunk);
  return Buffer.concat(out);
}

function* chunked(bytes: Buffer, size: number): Generator<Buffer> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

async function read(chunks: Iterable<Buffer>, want: (path: string) => boolean = () => true): Promise<TarFile[]> {
  const out: TarFile[] = [];
  for await (const file of readTar(
    (async function* () {
      yield* chunks;
    })(),
    want,
  ))
    out.push(file);
  return out;
}

/** A header block as GNU tar or Go's archive/tar may write one (ustar prefix field, GNU `L` type). */
function header(opts: { name: string; size: number; type: string; prefix?: string }): Buffer {
  const block = Buffer.alloc(512);
  block.write(opts.name, 0, 100, 'utf8');
  block.write('0000644\0', 100, 'latin1');
  block.write(`${opts.size.toString(8).padStart(11, '0')}\0`, 124, 'latin1');
  block.write('00000000000\0', 136, 'latin1');
  block.fill(0x20, 148, 156);
  block.write(opts.type, 156, 'latin1');
  block.write('ustar\u000000', 257, 'latin1');
  if (opts.prefix) block.write(opts.prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of block) sum += b;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return block;
}

const padded = (data: Buffer) => Buffer.concat([data, Buffer.alloc((512 - (data.length % 512)) % 512)]);

describe('readTar', () => {
  const entries: TarEntry[] = [
    { path: 'metadata/version', data: Buffer.from('1.1.0\n') },
    { path: 'resources/empty.json', data: Buffer.alloc(0) },
    { path: 'resources/block.json', data: Buffer.alloc(512, 'a') },
    { path: `resources/${'long-'.repeat(40)}name.json`, data: Buffer.from('{"pax":"a long name"}') },
    { path: 'resources/naïve-ümlaut.json', data: Buffer.from('{"pax":"not ASCII"}') },
    { path: 'resources/big.json', data: Buffer.alloc(70_000, 'b') },
    { path: 'resources/last.json', data: Buffer.from('{}') },
  ];

  it('reads every file, whatever the chunks it comes in (entries and headers across chunk boundaries)', async () => {
    const bytes = await tarBytes(entries);
    for (const size of [1, 7, 511, 512, 513, 4096, 64 * 1024, bytes.length]) {
      const files = await read(chunked(bytes, size));
      expect(
        files.map((f) => [f.path, f.body.toString('utf8')]),
        `chunks of ${size}`,
      ).toEqual(entries.map((e) => [e.path, e.data.toString('utf8')]));
    }
  });

  it('asks `want` with each path, before the body, and gives back only the files it wants', async () => {
    const bytes = await tarBytes(entries);
    const asked: string[] = [];
    const files = await read(chunked(bytes, 1000), (path) => {
      asked.push(path);
      return path.endsWith('.json') && !path.includes('big');
    });
    expect(asked).toEqual(entries.map((e) => e.path));
    expect(files.map((f) => f.path)).toEqual(entries.map((e) => e.path).filter((p) => p.endsWith('.json') && !p.includes('big')));
  });

  it('reads a ustar prefix field, a GNU long name and a pax size record', async () => {
    const long = `resources/${'g'.repeat(120)}.json`;
    const bytes = Buffer.concat([
      header({ name: 'settings.json', size: 2, type: '0', prefix: 'resources/configmaps/namespaces/shop' }),
      padded(Buffer.from('{}')),
      header({ name: '././@LongLink', size: long.length + 1, type: 'L' }),
      padded(Buffer.from(`${long}\0`)),
      header({ name: long.slice(0, 100), size: 3, type: '0' }),
      padded(Buffer.from('[1]')),
      header({ name: 'resources/', size: 0, type: '5' }),
      header({ name: 'PaxHeaders/sized', size: paxRecord('size', '4').length, type: 'x' }),
      padded(paxRecord('size', '4')),
      header({ name: 'resources/sized.json', size: 0, type: '0' }),
      padded(Buffer.from('true')),
      TAR_END_OF_ARCHIVE,
    ]);
    const files = await read(chunked(bytes, 300));
    expect(files.map((f) => [f.path, f.body.toString()])).toEqual([
      ['resources/configmaps/namespaces/shop/settings.json', '{}'],
      [long, '[1]'],
      ['resources/sized.json', 'true'],
    ]);
  });

  it('an archive cut anywhere before its end-of-archive blocks is an error, never fewer files', async () => {
    const bytes = await tarBytes(entries);
    const end = bytes.length - TAR_END_OF_ARCHIVE.length;
    for (const cut of [0, 100, 512, 1024 + 5, end - 70_000, end]) {
      await expect(read(chunked(bytes.subarray(0, cut), 4096)), `cut at ${cut}`).rejects.toThrow(
        /STORAGE_CORRUPT_OBJECT: tar archive: the archive ends before its end-of-archive blocks/,
      );
    }
  });

  it('a header whose checksum does not match is an error', async () => {
    const bytes = await tarBytes(entries);
    bytes[3] = (bytes[3] as number) ^ 1;
    await expect(read([bytes])).rejects.toThrow(/STORAGE_CORRUPT_OBJECT: tar archive: a header checksum does not match/);
  });
});
