import { gzipSync } from 'node:zlib';
import { StorageMeter } from '@stowage/storage';
import { describe, expect, it } from 'vitest';
import { countersWithOwnPuts, STORAGE_COUNTER } from './storage-cost.js';

const sizeOf = (bodies: Buffer[]) => bodies.reduce((sum, b) => sum + b.length, 0);

describe('countersWithOwnPuts', () => {
  it('states the exact bytes of its own bodies, also when a compressed body never settles', async () => {
    // A body whose size swings with the number it states: one byte more for an even count, as a
    // compressed body's can. Without a way out, the count it states is never its own size.
    const swinging = (c: Record<string, number>) => Buffer.alloc(100 + ((c[STORAGE_COUNTER.bytesWritten] ?? 0) % 2), 'x');
    const meter = new StorageMeter();
    const own = await meter.run(() =>
      countersWithOwnPuts({}, (c) => [swinging(c), Buffer.from(JSON.stringify({ written: c[STORAGE_COUNTER.bytesWritten] }))], {
        lastIsJson: true,
      }),
    );
    expect(own.counters[STORAGE_COUNTER.bytesWritten]).toBe(sizeOf(own.bodies));
    expect(own.counters[STORAGE_COUNTER.put]).toBe(2);
    // The padded JSON still parses, to the figure it states.
    expect(JSON.parse(own.bodies[1]!.toString()).written).toBe(sizeOf(own.bodies));
  });

  it('states the exact bytes of a real gzipped manifest and its JSON marker, whatever counts they carry', async () => {
    for (let seed = 0; seed < 200; seed++) {
      const counters = { itemsBackedUp: seed * 7919, [STORAGE_COUNTER.bytesWritten]: seed * 104_729, [STORAGE_COUNTER.put]: seed };
      const own = await new StorageMeter().run(() =>
        countersWithOwnPuts(
          counters,
          (c) => [gzipSync(Buffer.from(JSON.stringify({ seed, counters: c }))), Buffer.from(JSON.stringify({ status: c }))],
          { lastIsJson: true },
        ),
      );
      expect(own.counters[STORAGE_COUNTER.bytesWritten]! - counters[STORAGE_COUNTER.bytesWritten]!, `seed ${seed}`).toBe(
        sizeOf(own.bodies),
      );
    }
  });
});
