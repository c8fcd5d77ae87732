#!/usr/bin/env node
// Bundles the `stowage` CLI into one dependency-free ES module for Node >= 20 (dist/stowage.mjs):
// esbuild follows every import from src/main.ts (workspace packages through their
// `@stowage/source` condition, `yaml` from node_modules), so the packed tarball installs with no
// dependencies and no network. The same file is the `kubectl-stowage` plugin (package.json bin).
import { execFileSync } from 'node:child_process';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const pkg = JSON.parse(await readFile(new URL('./package.json', import.meta.url), 'utf8'));
const outfile = new URL('./dist/stowage.mjs', import.meta.url).pathname;

// `stowage install` applies k8s/ as kustomize renders it: each storage layout's rendering goes into
// the bundle here (src/install/manifests.ts reads them; run from the sources it renders them itself).
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const kustomizeDirs = { claim: 'k8s/base', s3: 'k8s/overlays/s3' };
const rendered = Object.fromEntries(
  Object.entries(kustomizeDirs).map(([layout, dir]) => [
    layout,
    execFileSync('kubectl', ['kustomize', dir], { cwd: repoRoot, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }),
  ]),
);

const built = await build({
  write: false,
  entryPoints: [new URL('./src/main.ts', import.meta.url).pathname],
  outfile,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  conditions: ['@stowage/source'],
  // The volume repository needs a native zstd addon: `stowage repo …` says so when it is absent
  // (the installed CLI); in a checkout it loads from the workspace.
  external: ['@stowage/repository'],
  define: { STOWAGE_CLI_VERSION: JSON.stringify(pkg.version), STOWAGE_K8S_RENDERED: JSON.stringify(rendered) },
  // `yaml` ships CommonJS for Node, which requires Node's built-ins: give the module a require.
  banner: {
    js: "#!/usr/bin/env node\nimport { createRequire as __stowageRequire } from 'node:module';\nconst require = __stowageRequire(import.meta.url);",
  },
  legalComments: 'none',
  logLevel: 'warning',
});
// Written aside, then renamed into place: test files that build at the same time (each runs
// this script) never see, or leave, a half-written bundle.
const [output] = built.outputFiles;
const partial = `${outfile}.${process.pid}.partial`;
// A fresh clone has no dist/ (it is git-ignored).
await mkdir(new URL('./dist/', import.meta.url), { recursive: true });
await writeFile(partial, output.contents, { mode: 0o755 });
await chmod(partial, 0o755);
await rename(partial, outfile);
