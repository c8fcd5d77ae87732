/**
 * Reads a run (backup or restore) from its live state; if the run was archived while it was read
 * (finalize writes the archive and sets `archivedAt` before it drops the live state), reads it again
 * from the archive. The one place both views handle that race.
 */
export async function readAcrossArchiving<S, T>(
  subject: S,
  run: { isArchived(subject: S): boolean; reload(): Promise<S | undefined>; read(subject: S): Promise<T> },
): Promise<T> {
  const first = await run.read(subject);
  if (run.isArchived(subject)) return first;
  const now = await run.reload();
  return now !== undefined && run.isArchived(now) ? await run.read(now) : first;
}
