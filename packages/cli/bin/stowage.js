#!/usr/bin/env node
// `stowage`: runs the TypeScript CLI (src/main.ts) through tsx with the workspace source
// condition, so nothing has to be built first. Exit code and signals pass through.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const tsxLoader = pathToFileURL(require.resolve('tsx')).href;
const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));

const child = spawn(process.execPath, ['--conditions=@stowage/source', '--import', tsxLoader, main, ...process.argv.slice(2)], {
  stdio: 'inherit',
});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => child.kill(signal));
}
child.on('exit', (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  else process.exit(code ?? 1);
});
