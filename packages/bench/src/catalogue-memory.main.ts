/**
 * pnpm bench:catalogue [pods …] — Redis memory per finished backup (default: a 100-pod and a
 * 2,000-pod backup), each in a fresh environment (redis-server, simulator, a worker process, node
 * agents). Prints a Markdown table (for RELIABILITY.md) and the JSON of every run.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CatalogueMemoryResult, runCatalogueMemory } from './catalogue-memory.js';

const say = (line: string) => process.stderr.write(`${line}\n`);
const args = process.argv.slice(2);
const sizes = args.length > 0 ? args.map(Number) : [100, 2_000];
const bad = args.filter((a) => !/^\d+$/.test(a) || Number(a) < 1);
if (bad.length > 0) {
  say(`bench:catalogue: pod counts must be whole numbers >= 1, got ${bad.join(', ')}\nusage: pnpm bench:catalogue [pods …]`);
  process.exit(2);
}
const logDir = join(tmpdir(), `stowage-bench-catalogue-${Date.now()}`);
const results: CatalogueMemoryResult[] = [];
for (const pods of sizes) {
  const r = await runCatalogueMemory(pods, logDir, say);
  results.push(r);
  say(
    `  ${pods} pods: ${r.phase}; finished backup in Redis ${r.finishedBytes} B (${Object.keys(r.finishedKeys).join(', ')}), live peak ${r.peakLiveBytes} B`,
  );
}
const kib = (b: number) => `${(b / 1024).toFixed(2)} KiB`;
const lines = [
  `command: \`pnpm bench:catalogue${args.length > 0 ? ` ${args.join(' ')}` : ''}\``,
  '',
  '| pods | phase | blocks | PVBs | hook runs | Redis after the end (keys) | + index entry | live state at its peak (sampled, keys) | retained BullMQ jobs (keys) | Stowage sidecars in storage | makespan |',
  '| ---: | --- | ---: | ---: | ---: | --- | ---: | --- | --- | ---: | ---: |',
  ...results.map(
    (r) =>
      `| ${r.pods} | ${r.phase} | ${r.blocks} | ${r.pvbs} | ${r.hookRuns} | ${kib(r.finishedBytes)} (${Object.entries(r.finishedKeys)
        .map(([k, v]) => `${k} ${v} B`)
        .join(
          ', ',
        )}) | ${r.indexEntryBytes} B | ${kib(r.peakLiveBytes)} (${r.peakLiveKeys}) | ${kib(r.retainedJobBytes)} (${r.retainedJobKeys}) | ${kib(r.sidecarBytes)} | ${(r.makespanMs / 1000).toFixed(1)} s |`,
  ),
];
process.stdout.write(`${lines.join('\n')}\n\n${JSON.stringify(results, null, 2)}\n`);
