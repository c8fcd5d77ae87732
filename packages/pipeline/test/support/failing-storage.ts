import type { BackupStorage } from '@stowage/storage';

/**
 * Storage whose writes of a key ending in `suffix` fail the first `failures` times: a finalize cut
 * off just before that write (the process died), so the next run must finish the job.
 */
export function storageFailingWrites(base: BackupStorage, suffix: string, failures: number): BackupStorage & { failed: () => number } {
  let failed = 0;
  return {
    putObject: async (key, data, opts) => {
      if (key.endsWith(suffix) && failed < failures) {
        failed++;
        throw new Error(`injected: the process died before ${suffix} was written`);
      }
      return base.putObject(key, data, opts);
    },
    putStream: (k, b) => base.putStream(k, b),
    getObject: (k) => base.getObject(k),
    exists: (k) => base.exists(k),
    list: (p) => base.list(p),
    deletePrefix: (p) => base.deletePrefix(p),
    failed: () => failed,
  };
}
