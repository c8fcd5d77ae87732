#!/usr/bin/env node
// Preflight for `pnpm test` and `.ci/run`: the system tools the tests need and that no npm
// package brings. One list, used by both. A missing tool is installed with apt-get when this
// machine allows it (root, apt-get on PATH); otherwise one line per missing tool, with the
// command that installs it, and exit 1 before any test starts.
//
// Env: STOWAGE_PREFLIGHT_INSTALL=never reports without installing.
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** Each tool the test suite runs as a program, the Debian package that has it, and who needs it. */
export const REQUIRED_TOOLS = [
  { command: 'redis-server', aptPackage: 'redis-server', neededBy: 'every test that uses Redis starts its own redis-server' },
  { command: 'redis-cli', aptPackage: 'redis-server', neededBy: 'the deploy tests probe Redis with it' },
  { command: 'kubectl', aptPackage: 'kubernetes-client', neededBy: 'the simulator and deploy tests run kubectl' },
  {
    command: 'openssl',
    aptPackage: 'openssl',
    neededBy: 'the simulator makes its TLS certificate with it (kubectl sends credentials only over HTTPS)',
  },
  { command: 'docker-compose', aptPackage: 'docker-compose', neededBy: 'the deploy tests validate docker-compose.yml' },
  {
    command: 'setpriv',
    aptPackage: 'util-linux',
    neededBy: "the repository tests back up an unreadable file as root without root's read-any-file rights",
  },
  { command: 'promtool', aptPackage: 'prometheus', neededBy: 'the deploy tests check and unit-test the alert rules' },
];

/** The full path of `command` on `pathEnv`, or undefined. */
export function which(command, pathEnv) {
  for (const dir of (pathEnv ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export function missingTools(pathEnv, tools = REQUIRED_TOOLS) {
  return tools.filter((tool) => which(tool.command, pathEnv) === undefined);
}

/** One line per missing tool, naming it, why the tests need it, and how to install it. */
export function missingToolLines(missing) {
  return missing.map(
    (tool) => `preflight: ${tool.command} is missing (${tool.neededBy}); install it: sudo apt-get install -y ${tool.aptPackage}`,
  );
}

function canInstall(env) {
  if (env.STOWAGE_PREFLIGHT_INSTALL === 'never') return false;
  return typeof process.getuid === 'function' && process.getuid() === 0 && which('apt-get', env.PATH) !== undefined;
}

function aptInstall(packages, env) {
  const run = (args) =>
    spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...env, DEBIAN_FRONTEND: 'noninteractive' } });
  process.stderr.write(`preflight: installing ${packages.join(' ')} with apt-get\n`);
  if (run(['update', '-qq']).status !== 0) return false;
  return run(['install', '-y', '-qq', ...packages]).status === 0;
}

export function preflight(env = process.env) {
  let missing = missingTools(env.PATH);
  if (missing.length > 0 && canInstall(env)) {
    aptInstall([...new Set(missing.map((tool) => tool.aptPackage))], env);
    missing = missingTools(env.PATH);
  }
  return missing;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const missing = preflight();
  if (missing.length > 0) {
    for (const line of missingToolLines(missing)) process.stderr.write(`${line}\n`);
    process.stderr.write('preflight: no test was run; install the tools above, then run the command again\n');
    process.exit(1);
  }
}
