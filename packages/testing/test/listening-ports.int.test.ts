import { spawn } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { listeningPort, listeningPorts, type RedisServer, startRedisServer } from '../src/index.js';

const listen = async (server: Server, host?: string): Promise<number> => {
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return (server.address() as { port: number }).port;
};

/** A node process that listens on `count` ports of the kernel's choosing and prints them. */
const child = (count: number) =>
  spawn(
    process.execPath,
    [
      '-e',
      `const net = require('node:net'); const ports = [];
       for (let i = 0; i < ${count}; i++) { const s = net.createServer().listen(0, () => { ports.push(s.address().port); if (ports.length === ${count}) console.log(ports.join(' ')); }); }`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );

const printed = (proc: ReturnType<typeof child>) =>
  new Promise<number[]>((resolve) => proc.stdout?.once('data', (d: Buffer) => resolve(d.toString().trim().split(' ').map(Number))));

describe('listeningPorts', () => {
  const servers: Server[] = [];
  const procs: ReturnType<typeof child>[] = [];
  afterEach(async () => {
    for (const p of procs.splice(0)) p.kill('SIGKILL');
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });

  it('names the ports a process listens on (IPv4 and IPv6), not those of its connections', async () => {
    const v4 = createServer((socket) => socket.on('error', () => {}));
    const any = createServer();
    servers.push(v4, any);
    const ports = [await listen(v4, '127.0.0.1'), await listen(any)];
    const client = await new Promise<Socket>((resolve) => {
      const s = connect(ports[0]!, '127.0.0.1', () => resolve(s));
    });
    try {
      const mine = await listeningPorts(process.pid);
      expect(mine).toEqual(expect.arrayContaining(ports));
      expect(mine).not.toContain(client.localPort);
    } finally {
      client.destroy();
    }
  });

  it("learns a child's port (PORT=0) from the child itself; several are an error; a gone process has none", async () => {
    const one = child(1);
    procs.push(one);
    const [port] = await printed(one);
    expect(await listeningPort(one.pid as number)).toBe(port);
    const two = child(2);
    procs.push(two);
    await printed(two);
    await expect(listeningPort(two.pid as number)).rejects.toThrow(/listens on several ports/);
    const exited = new Promise((r) => one.once('exit', r));
    one.kill('SIGKILL');
    await exited;
    expect(await listeningPorts(one.pid as number)).toEqual([]);
  });
});

describe('a private redis-server and its port', () => {
  let server: RedisServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('never takes another redis-server on its port for its own: restarting onto a taken port fails', async () => {
    server = await startRedisServer();
    await server.kill(true);
    // Another process's server binds the port meanwhile (as one may between a probe and a bind).
    const other = spawn('redis-server', ['--port', String(server.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    try {
      const probe = new Redis({ port: server.port, host: '127.0.0.1', retryStrategy: () => 25 });
      probe.on('error', () => {});
      expect(await probe.ping()).toBe('PONG'); // queued until the other server answers
      probe.disconnect();
      await expect(server.start()).rejects.toThrow(/exited/);
    } finally {
      other.kill('SIGKILL');
    }
  });
});
