import type { StowageApiClient } from './api-client.js';
import type { Backup, Block } from './api-types.js';
import { BackupProgress, type ProgressOutput, ProgressRenderer } from './progress.js';

export interface FollowOptions {
  /** Where the bars (TTY) or lines (not a TTY) go. */
  output: ProgressOutput;
  signal?: AbortSignal;
  /** Refresh PVB bytes from GET /blocks this often while running; default 1 s. 0 = never. */
  blocksRefreshMs?: number;
  /** Skip the refresh when the backup has more blocks than this (one page); default 1,000. */
  blocksRefreshMaxBlocks?: number;
  clock?: () => number;
}

export interface FollowResult {
  backup: Backup;
  blocks: Block[];
}

/**
 * Follows a backup to its end from the SSE stream, drawing progress, then reads its final state
 * and blocks. PVB bytes are refreshed from GET /blocks now and then (the events carry bytes
 * only when the pipeline happens to observe progress).
 */
export async function followBackup(client: StowageApiClient, name: string, opts: FollowOptions): Promise<FollowResult> {
  const clock = opts.clock ?? Date.now;
  const model = new BackupProgress(name, clock());
  const renderer = new ProgressRenderer(opts.output, model, clock);
  const refreshMs = opts.blocksRefreshMs ?? 1_000;
  const maxBlocks = opts.blocksRefreshMaxBlocks ?? 1_000;
  let refreshing = false;
  let refreshEnabled = refreshMs > 0;
  const refresh = async (): Promise<void> => {
    if (refreshing || !refreshEnabled) return;
    refreshing = true;
    try {
      const page = await client.listBlocks(name, { limit: maxBlocks });
      if (page.nextCursor) refreshEnabled = false; // too large to poll; events only
      model.applyBlocks(page.items);
      renderer.tick();
    } catch {
      // progress is best effort; the stream and the final read decide
    } finally {
      refreshing = false;
    }
  };
  const timer = setInterval(
    () => {
      renderer.tick();
      void refresh();
    },
    refreshMs > 0 ? refreshMs : 1_000,
  );
  try {
    for await (const ev of client.events(name, opts.signal ? { signal: opts.signal } : {})) {
      renderer.onEvent(ev, model.apply(ev));
    }
  } finally {
    clearInterval(timer);
  }
  const [backup, blocks] = await Promise.all([client.getBackup(name), client.allBlocks(name)]);
  model.phase = backup.phase;
  model.applyBlocks(blocks);
  renderer.finish();
  return { backup, blocks };
}
