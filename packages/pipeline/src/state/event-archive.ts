import { type BackupStorage, readGzipJson, writeGzipJson } from '@stowage/storage';
import type { RunEvent, RunRecord, RunState } from './run-state.js';

/*
 * A run's event stream in storage, for backups and restores alike: finalize copies the stream out
 * of Redis in segments (writeEventSegments), and the API replays them after a given id
 * (readEventSegments) once Redis no longer holds the stream. Where a segment lives is the caller's
 * layout (`segmentKey`).
 */

/** Events per segment object. */
export const ARCHIVE_EVENTS_PER_SEGMENT = 2_000;

/** The index of the archived segments, kept in the run's archive record. */
export interface EventSegmentIndex {
  count: number;
  segments: Array<{ count: number; firstId: string; lastId: string }>;
}

/** Thrown when an event segment the index names is missing. */
export class EventArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EventArchiveError';
  }
}

/** Stream ids `ms-seq` compared as numbers (string order is wrong across digit counts). */
export function compareStreamIds(a: string, b: string): number {
  const [am, as] = a.split('-').map((x) => BigInt(x));
  const [bm, bs] = b.split('-').map((x) => BigInt(x));
  if (am !== bm) return (am ?? 0n) < (bm ?? 0n) ? -1 : 1;
  if (as === bs) return 0;
  return (as ?? 0n) < (bs ?? 0n) ? -1 : 1;
}

/** Copies the run's whole event stream from Redis to storage, a segment at a time; returns the index. */
export async function writeEventSegments(
  storage: BackupStorage,
  state: RunState<RunRecord>,
  name: string,
  segmentKey: (segment: number) => string,
): Promise<EventSegmentIndex> {
  const index: EventSegmentIndex = { count: 0, segments: [] };
  for (let after = '0'; ; ) {
    const events = await state.readEvents(name, after, { count: ARCHIVE_EVENTS_PER_SEGMENT });
    if (events.length === 0) return index;
    await writeGzipJson(storage, segmentKey(index.segments.length), events);
    index.segments.push({ count: events.length, firstId: events[0]!.id, lastId: events.at(-1)!.id });
    index.count += events.length;
    after = events.at(-1)!.id;
  }
}

/** Archived events after `afterId` (exclusive; `0` from the start), a segment at a time, reading only the segments needed. */
export async function* readEventSegments(
  storage: Pick<BackupStorage, 'getObject'>,
  index: EventSegmentIndex,
  afterId: string,
  segmentKey: (segment: number) => string,
): AsyncGenerator<RunEvent[]> {
  for (const [i, segment] of index.segments.entries()) {
    if (compareStreamIds(segment.lastId, afterId) <= 0) continue;
    const key = segmentKey(i);
    const events = (await readGzipJson(storage, key)) as RunEvent[] | undefined;
    if (!Array.isArray(events)) throw new EventArchiveError(`${key} is missing: the finished run's events cannot be read`);
    yield events.filter((e) => compareStreamIds(e.id, afterId) > 0);
  }
}
