import { join } from 'node:path';

/**
 * Profiling the driver (plan, finalize, the simulator) over the measured backup only:
 * BENCH_DRIVER_CPU_PROF=<dir> writes `<dir>/<run>.cpuprofile` (open it in Chrome DevTools). Used by the
 * orchestration runs, the measured backup of each fs-backup mode, the huge scenario's big backups and each
 * measured restore of the restore scenario (plan, tiers and finalize run in the driver).
 */
export async function startDriverProfile(): Promise<{ stop(name: string): Promise<void> } | undefined> {
  const dir = process.env.BENCH_DRIVER_CPU_PROF;
  if (!dir) return undefined;
  const { Session } = await import('node:inspector/promises');
  const { mkdir, writeFile } = await import('node:fs/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return {
    async stop(name: string) {
      const { profile } = await session.post('Profiler.stop');
      session.disconnect();
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
    },
  };
}
