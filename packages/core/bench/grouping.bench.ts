/*
 * ItemBlock grouping benchmark: a synthetic cluster of 100k pods, 100k PVCs and 100k PVs
 * (each pod mounts its own PVC; every 50th pod also mounts a PVC shared with its neighbour),
 * spread over 100 namespaces. Run: pnpm --filter @stowage/core bench
 * Not a test: it prints timings, BENCHMARKS.md records them with the machine they came from.
 */
import { cpus, loadavg } from 'node:os';
import { validateBackupRequest } from '../src/backup-spec.schema.js';
import { type ClusterItem, groupItemBlocks } from '../src/item-blocks.js';
import type { PersistentVolume, PersistentVolumeClaim, Pod } from '../src/kube-types.js';

const PODS = Number(process.argv[2] ?? 100_000);
const NAMESPACES = 100;
const SHARED_EVERY = 50;
const RUNS = 5;

function buildCluster(podCount: number): ClusterItem[] {
  const items: ClusterItem[] = [];
  for (let i = 0; i < podCount; i++) {
    const namespace = `ns-${i % NAMESPACES}`;
    const claim = `data-${i}`;
    const volumes: NonNullable<Pod['spec']['volumes']> = [
      { name: 'data', persistentVolumeClaim: { claimName: claim } },
      { name: 'scratch', emptyDir: {} },
    ];
    // every SHARED_EVERY-th pod also mounts the PVC of the pod NAMESPACES places before it (same namespace)
    if (i % SHARED_EVERY === 0 && i >= NAMESPACES)
      volumes.push({ name: 'shared', persistentVolumeClaim: { claimName: `data-${i - NAMESPACES}` } });
    const pod: Pod = {
      metadata: { name: `pod-${i}`, namespace, uid: `uid-${i}`, labels: { app: `app-${i % 7}` } },
      spec: { nodeName: `node-${i % 20}`, containers: [{ name: 'main' }], volumes },
      status: { phase: 'Running' },
    };
    const pvc: PersistentVolumeClaim = {
      metadata: { name: claim, namespace },
      spec: { volumeName: `pv-${i}`, storageClassName: 'standard' },
      status: { phase: 'Bound' },
    };
    const pv: PersistentVolume = {
      metadata: { name: `pv-${i}` },
      spec: { capacity: { storage: '1Gi' }, claimRef: { namespace, name: claim } },
    };
    items.push(
      { group: '', resource: 'pods', namespaced: true, object: pod },
      { group: '', resource: 'persistentvolumeclaims', namespaced: true, object: pvc },
      { group: '', resource: 'persistentvolumes', namespaced: false, object: pv },
    );
  }
  return items;
}

const load = () =>
  loadavg()
    .map((value) => value.toFixed(1))
    .join(' ');
console.log(`${new Date().toISOString()}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, load average ${load()} at start`);

const validation = validateBackupRequest({ spec: { includeClusterResources: true } });
if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
const spec = validation.value;

const items = buildCluster(PODS);
// shuffle deterministically so the input is not conveniently ordered
let seed = 42;
for (let i = items.length - 1; i > 0; i--) {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  const j = seed % (i + 1);
  [items[i], items[j]] = [items[j] as ClusterItem, items[i] as ClusterItem];
}

console.log(
  `node ${process.version}, ${items.length} items (${PODS} pods, ${PODS} PVCs, ${PODS} PVs, a shared PVC every ${SHARED_EVERY} pods)`,
);
const timings: number[] = [];
const cpuTimings: number[] = [];
let result = groupItemBlocks(items, spec);
for (let run = 0; run < RUNS; run++) {
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  result = groupItemBlocks(items, spec);
  const cpu = process.cpuUsage(cpuStart);
  timings.push(performance.now() - start);
  cpuTimings.push((cpu.user + cpu.system) / 1000);
}
cpuTimings.sort((a, b) => a - b);
timings.sort((a, b) => a - b);
const median = timings[Math.floor(timings.length / 2)] ?? 0;
console.log(`blocks: ${result.blocks.length}, items in blocks: ${result.includedCount}, warnings: ${result.warnings.length}`);
console.log(
  `groupItemBlocks: median ${median.toFixed(0)} ms, min ${(timings[0] ?? 0).toFixed(0)} ms, max ${(timings.at(-1) ?? 0).toFixed(0)} ms over ${RUNS} runs (after 1 warm-up)`,
);
// CPU time of this process (incl. GC threads): less distorted than wall time when others share the cores
console.log(
  `groupItemBlocks CPU time: median ${(cpuTimings[Math.floor(cpuTimings.length / 2)] ?? 0).toFixed(0)} ms, min ${(cpuTimings[0] ?? 0).toFixed(0)} ms`,
);

// A machine-speed reference measured in the same process: put 300k "pods/<ns>/<name>" keys in a
// Map and sort them. On a shared, busy machine compare the grouping time with this, not with 2 s.
const referenceMs: number[] = [];
const referenceCpuMs: number[] = [];
for (let run = 0; run < RUNS; run++) {
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  const map = new Map<string, number>();
  for (let i = 0; i < items.length; i++) map.set(`pods/ns-${i % NAMESPACES}/item-${i}`, i);
  [...map.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  referenceMs.push(performance.now() - start);
  const cpu = process.cpuUsage(cpuStart);
  referenceCpuMs.push((cpu.user + cpu.system) / 1000);
}
referenceCpuMs.sort((a, b) => a - b);
const cpuMedian = cpuTimings[Math.floor(cpuTimings.length / 2)] ?? 0;
const referenceCpuMedian = referenceCpuMs[Math.floor(referenceCpuMs.length / 2)] ?? 1;
console.log(
  `reference CPU time: median ${referenceCpuMedian.toFixed(0)} ms; grouping / reference (CPU) = ${(cpuMedian / referenceCpuMedian).toFixed(1)}`,
);
referenceMs.sort((a, b) => a - b);
const referenceMedian = referenceMs[Math.floor(referenceMs.length / 2)] ?? 1;
console.log(
  `reference (Map + sort of 300k keys): median ${referenceMedian.toFixed(0)} ms; grouping / reference = ${(median / referenceMedian).toFixed(1)}`,
);
console.log(`load average ${load()} at end`);
