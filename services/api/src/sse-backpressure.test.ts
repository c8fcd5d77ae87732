import { createServer, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { writeWithBackpressure } from './backup-events.routes.js';

const EVENTS = 4_000;
const chunk = (i: number) => `id: ${i}\nevent: item\ndata: ${JSON.stringify({ i, pad: 'x'.repeat(10_000) })}\n\n`;

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('writeWithBackpressure', () => {
  it('a client that stops reading holds the writer: the response buffers at most a high-water mark, and every event arrives once it reads', async () => {
    let written = 0;
    let maxBuffered = 0;
    let response: ServerResponse | undefined;
    const server = createServer(async (_req, res) => {
      response = res;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let i = 0; i < EVENTS; i++) {
        await writeWithBackpressure(res, chunk(i));
        written++;
        maxBuffered = Math.max(maxBuffered, res.writableLength);
      }
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const socket = connect(port, '127.0.0.1');
      let received = '';
      socket.on('data', (d) => {
        received += String(d);
      });
      socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      await until('the first events', () => received.includes('id: 0'));
      socket.pause();
      // The writer stops once the kernel's and the response's buffers are full.
      let last = -1;
      await until('the writer to stop', () => {
        const still = written === last;
        last = written;
        return still && written > 0;
      });
      // Still held a while later (the kernel may take a little more as its window grows, never all).
      await new Promise((r) => setTimeout(r, 300));
      expect(written).toBeLessThan(EVENTS);
      const highWaterMark = response?.writableHighWaterMark ?? 0;
      expect(maxBuffered).toBeLessThanOrEqual(highWaterMark + chunk(EVENTS).length);

      socket.resume();
      await until('every event', () => received.includes(`id: ${EVENTS - 1}\n`));
      expect(written).toBe(EVENTS);
      socket.destroy();
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('returns when the client goes away while the writer waits', async () => {
    let ended: 'done' | undefined;
    const server = createServer(async (_req, res) => {
      res.writeHead(200);
      for (let i = 0; i < EVENTS && !res.destroyed; i++) await writeWithBackpressure(res, chunk(i));
      ended = 'done';
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const socket = connect(port, '127.0.0.1');
      socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      socket.pause();
      await new Promise((r) => setTimeout(r, 300));
      socket.destroy();
      await until('the writer to return', () => ended === 'done');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
