// A backup's blocks, kept fresh from its events: changed blocks' pages are re-fetched, throttled,
// so a 2,000-block backup costs a few requests a second at most, not one per event.

import { api } from './api.js';

export const PAGE_SIZE = 500;

export class BlocksStore {
  constructor(name, { minIntervalMs = 1000 } = {}) {
    this.name = name;
    this.blocks = [];
    this.total = 0;
    this.indexOf = new Map();
    this.pvbBlock = new Map();
    this.minIntervalMs = minIntervalMs;
    this.dirtyBlocks = new Set();
    this.wantTail = true;
    this.wantAll = false;
    this.listeners = new Set();
    this.timer = undefined;
    this.running = undefined;
    this.lastFetchAt = 0;
    this.version = 0;
    this.closed = false;
  }

  onChange(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit() {
    this.version++;
    for (const l of this.listeners) l(this);
  }

  /** Takes one event into account: a byte count is applied in place, anything else marks its block for re-fetch. */
  applyEvent(ev) {
    const d = ev.data ?? {};
    if (ev.type === 'pvb.progress') {
      const blockId = this.pvbBlock.get(d.pvb);
      const block = blockId !== undefined ? this.blocks[this.indexOf.get(blockId)] : undefined;
      const pvb = block?.podVolumeBackups.find((p) => p.name === d.pvb);
      if (pvb) {
        pvb.bytesDone = d.bytesDone;
        pvb.totalBytes = d.totalBytes;
        this.emit();
        return;
      }
    }
    const blockId = typeof d.blockId === 'string' ? d.blockId : this.pvbBlock.get(d.pvb);
    if (blockId !== undefined) this.dirtyBlocks.add(blockId);
    if (ev.type === 'plan.progress' || ev.type === 'plan.done' || ev.type === 'backup.phase') this.wantTail = true;
    if (blockId !== undefined && !this.indexOf.has(blockId)) this.wantTail = true;
    this.schedule();
  }

  /** Re-fetch soon, at most once per minIntervalMs, never two fetches at once. */
  schedule(force = false, { all = false } = {}) {
    if (this.closed) return;
    if (force) this.wantTail = true;
    if (all) this.wantAll = true;
    if (this.timer !== undefined || this.running) return;
    const wait = Math.max(0, this.lastFetchAt + this.minIntervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.refresh()
        .catch((err) => {
          for (const l of this.listeners) l(this, err);
        })
        .finally(() => {
          this.running = undefined;
          if (this.dirtyBlocks.size > 0 || this.wantTail || this.wantAll) this.schedule();
        });
    }, wait);
  }

  async refresh() {
    this.lastFetchAt = Date.now();
    const pages = new Set();
    for (const id of this.dirtyBlocks) {
      const i = this.indexOf.get(id);
      if (i !== undefined) pages.add(Math.floor(i / PAGE_SIZE));
    }
    const tail = this.wantTail || this.wantAll;
    if (this.wantAll) for (let p = 0; p * PAGE_SIZE < this.blocks.length; p++) pages.add(p);
    this.dirtyBlocks.clear();
    this.wantTail = false;
    this.wantAll = false;
    if (tail) pages.add(Math.floor(this.blocks.length / PAGE_SIZE));
    let changed = false;
    const sorted = [...pages].sort((a, b) => a - b);
    for (let k = 0; k < sorted.length; k++) {
      const page = sorted[k];
      const res = await api.blocks(this.name, String(page * PAGE_SIZE), PAGE_SIZE);
      if (this.closed) return;
      this.total = res.total;
      res.items.forEach((block, j) => {
        const index = page * PAGE_SIZE + j;
        this.blocks[index] = block;
        this.indexOf.set(block.id, index);
        for (const p of block.podVolumeBackups) this.pvbBlock.set(p.name, block.id);
      });
      changed = true;
      // Following the tail: keep going while the last page was full and more blocks exist.
      const next = page + 1;
      if (tail && k === sorted.length - 1 && res.nextCursor && next * PAGE_SIZE < res.total) sorted.push(next);
    }
    if (changed) this.emit();
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    this.listeners.clear();
  }
}
