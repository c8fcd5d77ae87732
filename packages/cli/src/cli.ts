import { parseApiUrl, StowageApiClient } from './api-client.js';
import { BACKUP_USAGE, runBackupCommand } from './backup-commands.js';
import type { CliEnv, CliIo } from './cli-io.js';
import { CliError, CliErrorCode, ExitCode, formatCliError, isCliError } from './errors.js';
import { INSTALL_USAGE } from './install/install-usage.js';
import { type GlobalFlags, takeGlobalFlags, tokenFromKubeconfig } from './kube-auth.js';
import { RESTORE_USAGE, runRestoreCommand } from './restore-command.js';
import { runScheduleCommand, SCHEDULE_USAGE } from './schedule-commands.js';

export { formatBackup, formatDescribe, formatList, formatLogLine } from './backup-commands.js';
export type { CliEnv, CliIo } from './cli-io.js';

/** Replaced by the bundle's build (package.json version); `dev` when run from the sources. */
declare const STOWAGE_CLI_VERSION: string | undefined;
export const CLI_VERSION = typeof STOWAGE_CLI_VERSION === 'string' ? STOWAGE_CLI_VERSION : 'dev';

export const USAGE = `usage: stowage <command> [options]   (also: kubectl stowage <command> …)

${BACKUP_USAGE}

${SCHEDULE_USAGE}

${RESTORE_USAGE}

${INSTALL_USAGE}

Volume repository (key in STOWAGE_REPO_KEY):
  repo restore --repo DIR --snapshot ID --target DIR
  repo verify --repo DIR [--json]
  repo snapshots --repo DIR [--json]
  repo forget --repo DIR --tag backup=NAME [--tag KEY=VALUE …]
  repo prune --repo DIR [--grace 24h] [--json]

  version                            this CLI's version

Every get, describe and list takes -o json|yaml|table (default table; --json is -o json).
backup, schedule and restore take -n/--namespace NS (create a namespaced backup or restore: RBAC on
backups/restores in NS; list only NS's) and --kubeconfig FILE (call the API as that file's current
user, with its token; the API must run with STOWAGE_KUBE_AUTH=enabled). Names are as the API lists them.
Exit codes: 0 ok, 1 failed, 2 bad command line, 3 (--wait) the backup or restore ended other than Completed.`;

/** Runs one `stowage …` command line and returns the exit code; never throws for expected failures. */
export async function runCli(argv: readonly string[], env: CliEnv, io: CliIo): Promise<number> {
  const [group, ...rest] = argv;
  try {
    switch (group) {
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        io.stdout.write(`${USAGE}\n`);
        return group === undefined ? ExitCode.usage : ExitCode.ok;
      case 'version':
      case '--version':
        io.stdout.write(`stowage ${CLI_VERSION}\n`);
        return ExitCode.ok;
      case 'backup':
      case 'backups': {
        const flags = takeGlobalFlags(rest);
        return await runBackupCommand(flags.argv, () => clientFromEnv(env, flags), io);
      }
      case 'schedule':
      case 'schedules': {
        const flags = takeGlobalFlags(rest);
        return await runScheduleCommand(flags.argv, () => clientFromEnv(env, flags), io);
      }
      case 'restore':
      case 'restores': {
        const flags = takeGlobalFlags(rest);
        return await runRestoreCommand(flags.argv, () => clientFromEnv(env, flags), io);
      }
      case 'install':
      case 'uninstall': {
        // Loaded only here: the Kubernetes client is most of the bundle, and other commands start without it.
        const { runInstallCommand } = await import('./install/install-commands.js');
        return await runInstallCommand(group, rest, io);
      }
      case 'repo':
        return await runRepoCommand(rest, env, io);
      default:
        throw new CliError(CliErrorCode.usage, `unknown command ${JSON.stringify(group)}; see "stowage help"`);
    }
  } catch (err) {
    if (isCliError(err)) {
      io.stderr.write(`${formatCliError(err).join('\n')}\n`);
      return err.exitCode;
    }
    throw err;
  }
}

async function runRepoCommand(argv: readonly string[], env: CliEnv, io: CliIo): Promise<number> {
  if (argv[0] === undefined || argv[0] === 'help' || argv.includes('--help')) {
    io.stdout.write(`${USAGE}\n`);
    return argv[0] === undefined ? ExitCode.usage : ExitCode.ok;
  }
  if (!env.STOWAGE_REPO_KEY?.trim() && argv[0] !== 'help')
    throw new CliError(CliErrorCode.config, 'STOWAGE_REPO_KEY is not set; it holds the key the repository was written with');
  // Loaded only for repo commands: backup commands start faster without it.
  const { ExitCode: RepoExitCode, runRepoCli } = await loadRepository();
  const code = await runRepoCli(argv, env, {
    out: (line) => io.stdout.write(`${line}\n`),
    err: (line) => io.stderr.write(`${line}\n`),
  });
  return code === RepoExitCode.Usage ? ExitCode.usage : code === RepoExitCode.Ok ? ExitCode.ok : ExitCode.failed;
}

/** The API client: STOWAGE_API_URL, and the token of `--kubeconfig`'s current user or STOWAGE_API_TOKEN; `-n` scopes it. */
export function clientFromEnv(env: CliEnv, flags: Partial<Omit<GlobalFlags, 'argv'>> = {}): StowageApiClient {
  const token = flags.kubeconfig ? tokenFromKubeconfig(flags.kubeconfig) : env.STOWAGE_API_TOKEN;
  return new StowageApiClient({ baseUrl: parseApiUrl(env.STOWAGE_API_URL), token, namespace: flags.namespace });
}

/** The volume repository engine, loaded only for repo commands; the installed CLI does not carry it (a native zstd addon). */
async function loadRepository(): Promise<typeof import('@stowage/repository')> {
  try {
    return await import('@stowage/repository');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new CliError(
      CliErrorCode.config,
      'stowage repo needs the volume repository engine (a native zstd module), which the installed CLI does not carry: run it from a Stowage checkout (pnpm stowage repo …) or in a node agent pod',
      [],
      { cause: err },
    );
  }
}
