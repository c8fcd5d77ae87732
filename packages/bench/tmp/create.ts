import { createKubeClients, createPvbClient } from '@stowage/kube';
import { generateCluster, startSimulator } from '@stowage/kube-sim';
const sim = await startSimulator({ fixture: generateCluster({ namespaces: 1, podsPerNamespace: 10, volumesPerPod: 1, bytesPerVolume: 0, nodes: 4 }), port: 0, materializeVolumes: 'none' });
const kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
const pvbs = createPvbClient(kube, { namespace: 'stowage' });
const mk = (i: number) => ({ metadata: { name: `pvb-${i}`, labels: { 'stowage.dev/node': 'node-1' } }, spec: { node: 'node-1', pod: { namespace: 'bench-0', name: 'app-0', uid: 'u' }, volume: 'v', backupStorageLocation: 'default', tags: {}, cancel: false } });
const { Session } = await import("node:inspector/promises"); const s = new Session(); s.connect(); await s.post("Profiler.enable"); await s.post("Profiler.start");
const times: number[] = [];
const c0 = process.cpuUsage();
for (let i = 0; i < 300; i++) { const t0 = performance.now(); await pvbs.createPvb(mk(i) as never); times.push(performance.now() - t0); }
const c = process.cpuUsage(c0);
const { profile } = await s.post("Profiler.stop"); (await import("node:fs")).writeFileSync("/tmp/prof/create.cpuprofile", JSON.stringify(profile));
times.sort((a, b) => a - b);
console.log(`create: p50 ${times[150]!.toFixed(2)} p90 ${times[270]!.toFixed(2)} max ${times[299]!.toFixed(2)} ms; cpu per create ${((c.user + c.system) / 300 / 1000).toFixed(2)} ms (client+sim in one process)`);
const t2: number[] = []; for (let i = 0; i < 300; i++) { const t0 = performance.now(); await pvbs.getPvb(`pvb-${i}`); t2.push(performance.now() - t0); }
t2.sort((a, b) => a - b); console.log(`get: p50 ${t2[150]!.toFixed(2)} p90 ${t2[270]!.toFixed(2)}`);
console.log("connections", sim.requests().connections, "requests", sim.requests().total);
await sim.close?.(); process.exit(0);
