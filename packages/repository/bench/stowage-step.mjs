// One Stowage step of the side-by-side benchmark, in a process of its own (as restic runs), so
// /usr/bin/time measures its wall time, CPU and peak RSS alone. Runs the compiled package (dist/),
// so no TypeScript transform is timed. Prints the result as JSON.
//
//   node bench/stowage-step.mjs init|backup|restore REPO [SOURCE|TARGET]   (key in STOWAGE_REPO_KEY)
import { Repository } from '../dist/index.js';

const [step, dir, path] = process.argv.slice(2);
const key = process.env.STOWAGE_REPO_KEY;
if (step === 'init') {
  await Repository.init({ dir, key });
  console.log('{}');
} else if (step === 'backup') {
  const repo = await Repository.open({ dir, key });
  const { snapshotId, stats } = await repo.backup(path, { tags: { volume: 'bench' } });
  console.log(JSON.stringify({ snapshotId, ...stats, skipped: stats.skipped.length }));
} else if (step === 'restore') {
  const repo = await Repository.open({ dir, key });
  const latest = (await repo.listSnapshots()).at(-1);
  console.log(JSON.stringify(await repo.restore(latest.id, path)));
} else {
  throw new Error(`unknown step ${step}`);
}
