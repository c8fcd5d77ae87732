/**
 * The simulator in a process of its own, as a cluster's API server runs apart from Stowage's API
 * service. Hosted in the driver, it shared one event loop with plan and finalize: a plan batch or
 * a finalize step held up every API answer the workers and node agents waited for, and the other
 * way round. Reads the fixture from BENCH_SIM_FIXTURE (JSON), prints `sim-ready {url, ...}`.
 */
import { readFile } from 'node:fs/promises';
import { type Fixture, type MaterializeMode, startSimulator } from '@stowage/kube-sim';

const fixturePath = process.env.BENCH_SIM_FIXTURE;
const dataRoot = process.env.BENCH_SIM_DATA_ROOT;
const materialize = process.env.BENCH_SIM_MATERIALIZE as MaterializeMode | undefined;
if (!fixturePath || !dataRoot || !materialize) {
  process.stderr.write('sim-host: BENCH_SIM_FIXTURE, BENCH_SIM_DATA_ROOT and BENCH_SIM_MATERIALIZE are required\n');
  process.exit(2);
}
const fixture = JSON.parse(await readFile(fixturePath, 'utf8')) as Fixture;
const sim = await startSimulator({ fixture, port: 0, dataRoot, materializeVolumes: materialize });
process.stdout.write(`sim-ready ${JSON.stringify({ url: sim.url, kubeconfigPath: sim.kubeconfigPath, dataRoot: sim.dataRoot })}\n`);
process.once('SIGTERM', () => {
  sim.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
