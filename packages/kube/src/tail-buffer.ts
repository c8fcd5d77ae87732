import { Writable } from 'node:stream';

/** Keeps only the last `limitBytes` bytes written; counts everything. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  totalBytes = 0;

  constructor(readonly limitBytes: number) {}

  push(chunk: Buffer): void {
    this.totalBytes += chunk.length;
    if (chunk.length >= this.limitBytes) {
      this.chunks = [chunk.subarray(chunk.length - this.limitBytes)];
      this.size = this.limitBytes;
      return;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.limitBytes) {
      const first = this.chunks[0]!;
      const excess = this.size - this.limitBytes;
      if (first.length <= excess) {
        this.chunks.shift();
        this.size -= first.length;
      } else {
        this.chunks[0] = first.subarray(excess);
        this.size -= excess;
      }
    }
  }

  /** The kept bytes as UTF-8 (a character cut at the start shows as U+FFFD). */
  toString(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

/** A Writable that feeds a TailBuffer; writes after end are ignored instead of crashing the process. */
export function tailWritable(buffer: TailBuffer): Writable {
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      buffer.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      callback();
    },
  });
  stream.on('error', () => undefined);
  return stream;
}
