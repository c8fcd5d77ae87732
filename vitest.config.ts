import { defineConfig } from 'vitest/config';

// One run for the whole workspace: workspace packages resolve to their TypeScript
// sources through the `@stowage/source` export condition, so nothing is built first.
const conditions = ['@stowage/source', 'node', 'import', 'default'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['@stowage/source'] } },
  test: {
    include: [
      'packages/*/src/**/*.test.ts',
      'packages/*/test/**/*.test.ts',
      'services/*/src/**/*.test.ts',
      'services/*/test/**/*.test.ts',
      'e2e/**/*.test.ts',
      'scripts/**/*.test.ts',
    ],
    exclude: ['**/node_modules/**', '**/dist/**'],
    // How long a test may run before it is called hung. Integration tests start real processes
    // (redis-server, the simulator, the services); on a loaded 2-core machine one that takes 10 s
    // quietly can take 40 s, so the bound is generous. Speed is measured in benchmarks, never here (CONTRIBUTING.md).
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
    reporters: ['default', './scripts/summary-reporter.ts'],
  },
});
