import { createKubeClients, execInPod } from '@stowage/kube';
import { generateCluster, startSimulator } from '@stowage/kube-sim';
const sim = await startSimulator({ fixture: generateCluster({ namespaces: 1, podsPerNamespace: 2, volumesPerPod: 0, bytesPerVolume: 0, nodes: 1, postHook: { durationMs: 1 } }), port: 0, materializeVolumes: 'none' });
const kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
const lat: number[] = []; const total: number[] = [];
const c0 = process.cpuUsage();
for (let i = 0; i < 200; i++) {
  const t0 = Date.now(); const p0 = performance.now();
  const res = await execInPod(kube, { namespace: 'bench-0', pod: 'app-0', container: 'app', command: ['/bin/sh', '-c', 'fsfreeze -u /data'], timeoutMs: 5000 });
  total.push(performance.now() - p0);
  const rec = sim.execLog().at(-1)!; lat.push(Date.parse(rec.startedAt) - t0);
  if (i === 0) console.log(res.outcome, (res as { exitCode?: number }).exitCode);
}
const c = process.cpuUsage(c0);
lat.sort((a, b) => a - b); total.sort((a, b) => a - b);
console.log(`call→sim start p50 ${lat[100]} p90 ${lat[180]} max ${lat[199]} ms; whole exec p50 ${total[100]!.toFixed(1)} ms; cpu/exec ${((c.user + c.system) / 200 / 1000).toFixed(2)} ms (client+sim)`);
await sim.close(); process.exit(0);
