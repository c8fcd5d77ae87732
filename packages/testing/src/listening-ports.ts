import { readdir, readFile, readlink } from 'node:fs/promises';

const LISTEN = '0A';

/**
 * The TCP ports a process listens on right now (Linux: its socket fds matched against
 * /proc/<pid>/net/tcp and tcp6), sorted. Empty while it listens on none, or once it is gone.
 *
 * A test starts a service on PORT=0 and learns its port from here: a port probed free first and
 * handed to the child is free only until someone binds it, and on a busy machine another process
 * does, in the seconds a child takes to start (then the child exits with EADDRINUSE, or the
 * readiness probe reaches the other process's server).
 */
export async function listeningPorts(pid: number): Promise<number[]> {
  const inodes = new Set<string>();
  let fds: string[];
  try {
    fds = await readdir(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  for (const fd of fds) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    const match = /^socket:\[(\d+)\]$/.exec(target);
    if (match) inodes.add(match[1]!);
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    const text = await readFile(`/proc/${pid}/net/${table}`, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== LISTEN || !inodes.has(fields[9]!)) continue;
      const port = Number.parseInt(fields[1]!.split(':').pop()!, 16);
      if (Number.isInteger(port)) ports.add(port);
    }
  }
  return [...ports].sort((a, b) => a - b);
}

/**
 * The one TCP port a service process (started with PORT=0) listens on, or undefined while it
 * listens on none yet. A process listening on several is an error: which one is its HTTP port?
 */
export async function listeningPort(pid: number): Promise<number | undefined> {
  const ports = await listeningPorts(pid);
  if (ports.length > 1) throw new Error(`process ${pid} listens on several ports (${ports.join(', ')}), not on one`);
  return ports[0];
}
