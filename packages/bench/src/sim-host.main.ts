/**
 * The simulator in a process of its own, as a cluster's API server runs apart from Stowage's API
 * service. Hosted in the driver, it shared one event loop with plan and finalize: a plan batch or
 * a finalize step held up every API answer the workers and node agents waited for, and the other
 * way round. Reads the fixture from BENCH_SIM_FIXTURE (JSON), applies the dev overlay's identities,
 * prints `sim-ready {url, kubeconfigPath, dataRoot, identities: {api, worker, nodeAgent, restorer, workerQueues}, cutMode}`
 * (cutMode: whether a snapshot's cut clones files on the data root's filesystem or copies them).
 */
import { readFile } from 'node:fs/promises';
import { type Fixture, type MaterializeMode, startSimulator } from '@stowage/kube-sim';
import { deployIdentities } from '@stowage/testing';

const fixturePath = process.env.BENCH_SIM_FIXTURE;
const dataRoot = process.env.BENCH_SIM_DATA_ROOT;
const materialize = process.env.BENCH_SIM_MATERIALIZE as MaterializeMode | undefined;
if (!fixturePath || !dataRoot || !materialize) {
  process.stderr.write('sim-host: BENCH_SIM_FIXTURE, BENCH_SIM_DATA_ROOT and BENCH_SIM_MATERIALIZE are required\n');
  process.exit(2);
}
const fixture = JSON.parse(await readFile(fixturePath, 'utf8')) as Fixture;
// Its clients are client-node (which sends tokens over plain HTTP too): HTTP spares the simulator the
// ~0.1 ms of CPU per request that TLS costs (BENCHMARKS.md, "Simulator: authentication and RBAC").
const sim = await startSimulator({ fixture, port: 0, dataRoot, materializeVolumes: materialize, kubeconfigServer: 'http' });
// The services run as the dev overlay's ServiceAccounts, under its RBAC, as deployed.
const { api, worker, nodeAgent, restorer, workerQueues } = await deployIdentities(sim);
const identities = { api, worker, nodeAgent, restorer, workerQueues: Object.fromEntries(workerQueues) };
const cutMode = await sim.cutMode();
process.stdout.write(
  `sim-ready ${JSON.stringify({ url: sim.url, kubeconfigPath: sim.kubeconfigPath, dataRoot: sim.dataRoot, identities, cutMode })}\n`,
);
process.once('SIGTERM', () => {
  sim.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
