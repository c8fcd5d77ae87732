import { expect } from 'vitest';
import {
  type ItemResult,
  type RestoreArchive,
  type RestoreState,
  type RunLogLine,
  readRestoreArchive,
  readRestoreArchiveItems,
  readRestoreArchiveLogs,
} from '../../../packages/pipeline/src/index.js';
import { type Stack, waitFor } from './stack.js';

const ENDED = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled']);

/** A finished restore as storage holds it once restore-finalize archived it (Redis then keeps only its record and counters). */
export interface ArchivedRestore extends RestoreArchive {
  phase: string;
  items: Record<string, ItemResult>;
  logs: RunLogLine[];
}

/** Waits (on the Redis record) until the restore ended and restore-finalize archived it; returns what storage holds of it. */
export async function waitForRestoreEnd(stack: Stack, restores: RestoreState, name: string, timeoutMs = 180_000): Promise<ArchivedRestore> {
  const phase = await waitFor(
    `restore ${name} to end`,
    async () => {
      const rec = await restores.getRestore(name).catch(() => undefined);
      return rec && ENDED.has(rec.phase) && rec.archivedAt !== undefined ? rec.phase : undefined;
    },
    timeoutMs,
    200,
  );
  const archive = await readRestoreArchive(stack.backupStorage, name);
  if (!archive) throw new Error(`restore ${name} is archived but storage has no restore.json`);
  const [items, logs] = await Promise.all([
    readRestoreArchiveItems(stack.backupStorage, name),
    readRestoreArchiveLogs(stack.backupStorage, name),
  ]);
  return { ...archive, phase, items, logs };
}

/**
 * The counters a restore's archive holds against those Redis keeps: the same, finalize's own storage
 * writes (the archive itself, restore.json last) included.
 */
export function expectArchivedCounters(archived: Readonly<Record<string, number>>, live: Readonly<Record<string, number>>): void {
  expect(live.storagePut ?? 0).toBeGreaterThan(0);
  expect(archived).toEqual(live);
}
