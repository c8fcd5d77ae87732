/** CLI: `pnpm sim -- --fixture FILE --port N --https-port N --kubeconfig PATH --data-root DIR`; serves until SIGINT/SIGTERM. */
import { parseArgs } from 'node:util';
import { SimError, SimErrorCode } from './api-status.js';
import { demoFixturePath, startSimulator } from './simulator.js';

function parseCli(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: {
      fixture: { type: 'string' },
      port: { type: 'string' },
      'https-port': { type: 'string' },
      'kubeconfig-server': { type: 'string' },
      host: { type: 'string' },
      kubeconfig: { type: 'string' },
      'data-root': { type: 'string' },
      manifest: { type: 'string', multiple: true },
      'no-authz': { type: 'boolean' },
      help: { type: 'boolean' },
    },
    allowPositionals: false,
    strict: true,
  });
  const portOf = (flag: string, value: string | undefined) => {
    const port = value === undefined ? 0 : Number(value);
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw new SimError(SimErrorCode.CLI_BAD_ARGUMENT, `--${flag} must be 0..65535, got ${value}`);
    return port;
  };
  const kubeconfigServer = values['kubeconfig-server'];
  if (kubeconfigServer !== undefined && kubeconfigServer !== 'https' && kubeconfigServer !== 'http')
    throw new SimError(SimErrorCode.CLI_BAD_ARGUMENT, `--kubeconfig-server must be https or http, got ${kubeconfigServer}`);
  return {
    ...values,
    port: portOf('port', values.port),
    httpsPort: portOf('https-port', values['https-port']),
    kubeconfigServer: kubeconfigServer as 'https' | 'http' | undefined,
  };
}

const usage = `Usage: pnpm sim -- [--fixture FILE] [--port N] [--https-port N] [--host 127.0.0.1] [--kubeconfig PATH]
  [--kubeconfig-server https|http] [--data-root DIR] [--manifest FILE ...] [--no-authz]
Without --fixture the bundled demo cluster is served (${demoFixturePath}).
Requests are authenticated and authorized (RBAC) as by a real API server; the kubeconfig is the admin's
(system:masters) and names the HTTPS port (kubectl sends credentials only over TLS; --kubeconfig-server http
names the plain port instead, for client-node-only clients). --no-authz lets every request through.`;

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
    httpsPort: cli.httpsPort,
    onWarning: (message) => process.stderr.write(`warning: ${message}\n`),
  };
  if (cli.fixture) options.fixture = cli.fixture;
  if (cli.host) options.host = cli.host;
  if (cli.kubeconfig) options.kubeconfigPath = cli.kubeconfig;
  if (cli['data-root']) options.dataRoot = cli['data-root'];
  if (cli.manifest) options.extraManifests = cli.manifest;
  if (cli['no-authz']) options.authz = false;
  if (cli.kubeconfigServer) options.kubeconfigServer = cli.kubeconfigServer;
  let sim: Awaited<ReturnType<typeof startSimulator>>;
  try {
    sim = await startSimulator(options);
  } catch (error) {
    process.stderr.write(`cannot start the simulator: ${(error as Error).message}\n`);
    process.exit(1);
  }
  process.stdout.write(
    `kube-sim serving ${sim.httpsUrl} (the kubeconfig's) and ${sim.url} (plain HTTP, and the control API)${options.authz === false ? ', with no authentication or authorization (--no-authz)' : ''}\nkubeconfig: ${sim.kubeconfigPath} (user admin, system:masters)\ndata root:  ${sim.dataRoot}\ntry: KUBECONFIG=${sim.kubeconfigPath} kubectl get pods -A\n`,
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
