/** CLI: `pnpm sim -- --fixture FILE --port N --kubeconfig PATH --data-root DIR`; serves until SIGINT/SIGTERM. */
import { parseArgs } from 'node:util';
import { SimError, SimErrorCode } from './api-status.js';
import { demoFixturePath, startSimulator } from './simulator.js';

function parseCli(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: {
      fixture: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      kubeconfig: { type: 'string' },
      'data-root': { type: 'string' },
      manifest: { type: 'string', multiple: true },
      help: { type: 'boolean' },
    },
    allowPositionals: false,
    strict: true,
  });
  const port = values.port === undefined ? 0 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new SimError(SimErrorCode.CLI_BAD_ARGUMENT, `--port must be 0..65535, got ${values.port}`);
  return { ...values, port };
}

const usage = `Usage: pnpm sim -- [--fixture FILE] [--port N] [--host 127.0.0.1] [--kubeconfig PATH] [--data-root DIR] [--manifest FILE ...]
Without --fixture the bundled demo cluster is served (${demoFixturePath}).`;

async function main(): Promise<void> {
  let cli: ReturnType<typeof parseCli>;
  try {
    cli = parseCli(process.argv.slice(2).filter((arg) => arg !== '--'));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${usage}\n`);
    process.exit(2);
  }
  if (cli.help) {
    process.stdout.write(`${usage}\n`);
    return;
  }
  const options: Parameters<typeof startSimulator>[0] = {
    port: cli.port,
    onWarning: (message) => process.stderr.write(`warning: ${message}\n`),
  };
  if (cli.fixture) options.fixture = cli.fixture;
  if (cli.host) options.host = cli.host;
  if (cli.kubeconfig) options.kubeconfigPath = cli.kubeconfig;
  if (cli['data-root']) options.dataRoot = cli['data-root'];
  if (cli.manifest) options.extraManifests = cli.manifest;
  let sim: Awaited<ReturnType<typeof startSimulator>>;
  try {
    sim = await startSimulator(options);
  } catch (error) {
    process.stderr.write(`cannot start the simulator: ${(error as Error).message}\n`);
    process.exit(1);
  }
  process.stdout.write(
    `kube-sim serving ${sim.url}\nkubeconfig: ${sim.kubeconfigPath}\ndata root:  ${sim.dataRoot}\ntry: KUBECONFIG=${sim.kubeconfigPath} kubectl get pods -A\n`,
  );
  const stop = (signal: string) => {
    process.stdout.write(`${signal}: stopping\n`);
    sim.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`close failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

await main();
