import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listeningPort } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitReady } from './bench-env.js';
import { BenchChild } from './child-process.js';

/** A service as the bench starts them: listens on PORT, answers /readyz. */
const SERVICE = `
import { createServer } from 'node:http';
const server = createServer((req, res) => { res.statusCode = req.url === '/readyz' ? 200 : 404; res.end(); });
server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
`;

describe('bench children bind PORT=0 and their port is read back', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stowage-bench-port-'));
    await writeFile(join(dir, 'service.ts'), SERVICE);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('waitReady finds the port the kernel picked and its /readyz', async () => {
    const child = new BenchChild({
      name: 'service',
      script: join(dir, 'service.ts'),
      cwd: dir,
      logFile: join(dir, 'service.log'),
      env: { PATH: process.env.PATH, PORT: '0' },
    });
    try {
      const port = await waitReady(child, 60_000);
      expect(port).toBeGreaterThan(0);
      expect(await listeningPort(child.pid)).toBe(port);
    } finally {
      await child.stop();
    }
  });
});
