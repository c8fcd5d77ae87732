import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Runs the deliberately broken fixtures of summary-reporter.test.ts (never part of the main run).
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('.', import.meta.url)),
    include: ['*.fixture.ts'],
    reporters: [fileURLToPath(new URL('../../summary-reporter.ts', import.meta.url))],
  },
});
