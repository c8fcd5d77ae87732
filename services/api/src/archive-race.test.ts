import { describe, expect, it } from 'vitest';
import { readAcrossArchiving } from './archive-race.js';

type Run = { name: string; archived: boolean; where: 'redis' | 'storage' };

/** A run and the reads made of it: `archiveDuringRead` archives it while the first read is under way. */
function setUp(start: Run, archiveDuringRead: boolean) {
  let current = start;
  const reads: Run[] = [];
  const ops = {
    isArchived: (r: Run) => r.archived,
    reload: async () => current,
    read: async (r: Run) => {
      reads.push(r);
      if (archiveDuringRead && reads.length === 1) current = { ...r, archived: true, where: 'storage' };
      return `${r.name} from ${r.where}`;
    },
  };
  return { ops, reads };
}

describe('readAcrossArchiving', () => {
  it('reads a live run once when it stays live', async () => {
    const { ops, reads } = setUp({ name: 'b1', archived: false, where: 'redis' }, false);
    expect(await readAcrossArchiving({ name: 'b1', archived: false, where: 'redis' }, ops)).toBe('b1 from redis');
    expect(reads).toHaveLength(1);
  });

  it('reads again from the archive when the run was archived during the read (the live state may be half dropped)', async () => {
    const live: Run = { name: 'b1', archived: false, where: 'redis' };
    const { ops, reads } = setUp(live, true);
    expect(await readAcrossArchiving(live, ops)).toBe('b1 from storage');
    expect(reads.map((r) => r.where)).toEqual(['redis', 'storage']);
  });

  it('reads an archived run once, without reloading it', async () => {
    const archived: Run = { name: 'b1', archived: true, where: 'storage' };
    let reloads = 0;
    const { ops, reads } = setUp(archived, false);
    const result = await readAcrossArchiving(archived, {
      ...ops,
      reload: async () => {
        reloads++;
        return archived;
      },
    });
    expect(result).toBe('b1 from storage');
    expect(reads).toHaveLength(1);
    expect(reloads).toBe(0);
  });

  it('keeps the first read when the run disappeared meanwhile (deleted)', async () => {
    const live: Run = { name: 'b1', archived: false, where: 'redis' };
    const { ops } = setUp(live, false);
    expect(await readAcrossArchiving(live, { ...ops, reload: async () => undefined })).toBe('b1 from redis');
  });
});
