/**
 * A set of chunk ids kept as their first 64 bits in an open-addressing table (8 bytes a slot,
 * at most 2/3 full): prune's mark set for millions of chunks in tens of MB instead of a
 * Set<string> of 64-character ids (~10x more). Chunk ids are HMAC outputs, so their first bits
 * are uniform and serve as the hash. Two ids sharing 64 bits would both count as present: the
 * only effect is that a garbage chunk is kept, never that a live one is deleted.
 */
export class ChunkKeySet {
  private hi: Uint32Array;
  private lo: Uint32Array;
  private mask: number;
  private count = 0;

  constructor(expected = 1024) {
    let capacity = 1024;
    while (capacity * 2 < expected * 3) capacity *= 2;
    this.hi = new Uint32Array(capacity);
    this.lo = new Uint32Array(capacity);
    this.mask = capacity - 1;
  }

  get size(): number {
    return this.count;
  }

  add(chunkId: string): void {
    const [hi, lo] = keyOf(chunkId);
    if (this.insert(hi, lo)) {
      this.count++;
      if (this.count * 3 > this.hi.length * 2) this.grow();
    }
  }

  has(chunkId: string): boolean {
    const [hi, lo] = keyOf(chunkId);
    for (let i = lo & this.mask; ; i = (i + 1) & this.mask) {
      const h = this.hi[i]!;
      const l = this.lo[i]!;
      if (h === 0 && l === 0) return false;
      if (h === hi && l === lo) return true;
    }
  }

  /** Bytes held by the table. */
  get bytes(): number {
    return this.hi.byteLength + this.lo.byteLength;
  }

  private insert(hi: number, lo: number): boolean {
    for (let i = lo & this.mask; ; i = (i + 1) & this.mask) {
      const h = this.hi[i]!;
      const l = this.lo[i]!;
      if (h === 0 && l === 0) {
        this.hi[i] = hi;
        this.lo[i] = lo;
        return true;
      }
      if (h === hi && l === lo) return false;
    }
  }

  private grow(): void {
    const { hi, lo } = this;
    this.hi = new Uint32Array(hi.length * 2);
    this.lo = new Uint32Array(lo.length * 2);
    this.mask = this.hi.length - 1;
    for (let i = 0; i < hi.length; i++) if (hi[i] !== 0 || lo[i] !== 0) this.insert(hi[i]!, lo[i]!);
  }
}

function keyOf(chunkId: string): [number, number] {
  const hi = Number.parseInt(chunkId.slice(0, 8), 16) >>> 0;
  const lo = Number.parseInt(chunkId.slice(8, 16), 16) >>> 0;
  // (0, 0) marks an empty slot; the id mapping to it shares a key with (0, 1) — keeps garbage at worst.
  return hi === 0 && lo === 0 ? [0, 1] : [hi, lo];
}
