/**
 * What authentication and RBAC cost the simulator: the same request stream (GET of one pod, and a
 * LIST of a namespace's 100 pods) against one simulator process with enforcement off (the peer),
 * as the admin (system:masters), as a service account allowed through a RoleBinding (the RBAC
 * path: index lookup and cached decision), over HTTPS, and a flood of unknown tokens (401).
 * Reports requests per second seen by the client and the simulator's CPU seconds per 1000 requests.
 *
 *   pnpm --filter @stowage/kube-sim bench:authz     (BENCH_REQUESTS=20000 BENCH_CONCURRENCY=32)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { fileURLToPath } from 'node:url';

const requests = Number(process.env.BENCH_REQUESTS ?? 20_000);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32);

interface Host {
  child: ChildProcess;
  url: string;
  httpsUrl: string;
  ca: string;
  adminToken: string;
  saToken: string;
}

/** Starts the simulator in its own process (as the benchmarks host it), with or without enforcement. */
async function startHost(authz: boolean): Promise<Host> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--conditions=@stowage/source', fileURLToPath(new URL('./sim-host.ts', import.meta.url))],
    {
      env: { ...process.env, BENCH_AUTHZ: authz ? '1' : '0' },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const line = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const at = buffered.indexOf('\n');
      if (at >= 0) resolve(buffered.slice(0, at));
    });
    child.once('exit', (code) => reject(new Error(`sim host exited ${code}`)));
  });
  return { child, ...(JSON.parse(line) as Omit<Host, 'child'>) };
}

function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function drive(
  base: string,
  path: string,
  token: string | undefined,
  ca?: string,
): Promise<{ perSecond: number; statuses: Record<number, number> }> {
  const secure = base.startsWith('https:');
  const agent = secure
    ? new https.Agent({ keepAlive: true, maxSockets: concurrency, ca })
    : new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const target = new URL(path, base);
  const statuses: Record<number, number> = {};
  let next = 0;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const headers: Record<string, string> = token ? { Authorization: `Bearer ${token}` } : {};
      const req = (secure ? https : http).request(target, { agent, headers }, (res) => {
        statuses[res.statusCode!] = (statuses[res.statusCode!] ?? 0) + 1;
        res.resume();
        res.on('end', () => resolve());
      });
      req.on('error', reject);
      req.end();
    });
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < requests) await one();
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { perSecond: requests / seconds, statuses };
}

const rows: string[] = [];
const row = async (host: Host, label: string, base: string, path: string, token: string | undefined) => {
  const before = cpuSeconds(host.child.pid!);
  const result = await drive(base, path, token, host.ca);
  const cpu = cpuSeconds(host.child.pid!) - before;
  rows.push(
    `| ${label} | ${path === list ? 'LIST 100 pods' : 'GET 1 pod'} | ${Math.round(result.perSecond)} | ${((cpu / requests) * 1000).toFixed(3)} | ${Object.entries(
      result.statuses,
    )
      .map(([code, n]) => `${n}×${code}`)
      .join(' ')} |`,
  );
};

const get = '/api/v1/namespaces/bench-1/pods/app-1';
const list = '/api/v1/namespaces/bench-1/pods';
const open = await startHost(false);
const enforced = await startHost(true);
try {
  for (const [path] of [[get], [list]] as const) {
    await drive(open.url, path, undefined); // warm-up of both
    await drive(enforced.url, path, enforced.saToken);
    await row(open, 'enforcement off (peer)', open.url, path, undefined);
    await row(enforced, 'admin (system:masters), HTTP', enforced.url, path, enforced.adminToken);
    await row(enforced, 'service account via RoleBinding, HTTP', enforced.url, path, enforced.saToken);
    await row(enforced, 'service account via RoleBinding, HTTPS', enforced.httpsUrl, path, enforced.saToken);
  }
  await row(enforced, 'unknown tokens (401)', enforced.url, get, 'no-such-token-of-anybody');
} finally {
  open.child.kill('SIGTERM');
  enforced.child.kill('SIGTERM');
}
process.stdout.write(
  `requests ${requests}, concurrency ${concurrency}, simulator in its own process\n\n| identity | request | req/s | sim CPU s / 1000 req | answers |\n| --- | --- | --- | --- | --- |\n${rows.join('\n')}\n`,
);
