/*
 * Counters a team can page on: counted where the event happens, by the one process that moved the
 * backup, from 0 at process start. Two api replicas (each hosting the backups queue) on one Redis
 * and a worker run real backups on the simulator; the replicas' success counters add up to the
 * number of backups, and a restarted api does not count the retained backups again.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { createLogger, loadConfig, type StowageConfig } from '@stowage/platform';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { startWorkerService, type WorkerService } from '@stowage/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiService, startApiService } from '../src/api-service.js';

const TOKEN = 'metrics-test-token-0123456789';
let redis: { url: string; stop(): Promise<void> };
let sim: Simulator;
let storageDir: string;
let config: StowageConfig;
let worker: WorkerService;
const apis: ApiService[] = [];
const logger = createLogger({ level: 'error', name: 'metrics-test' });

async function startApi(): Promise<ApiService> {
  const api = await startApiService({ config, logger, port: 0, host: '127.0.0.1' });
  api.markReady();
  apis.push(api);
  return api;
}

async function stopApi(api: ApiService): Promise<void> {
  await api.stopHttp();
  await api.stopWorkers();
  await api.stopQueues();
  await api.stopRedis();
  apis.splice(apis.indexOf(api), 1);
}

/** One sample's value in a Prometheus text exposition (absent: 0, a counter never moved in this process). */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

const scrape = async (url: string) => (await fetch(`${url}/metrics`)).text();

async function backupUntilDone(api: ApiService, name: string): Promise<string> {
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const body = { name, spec: { includedNamespaces: ['media'], includedResources: ['configmaps', 'serviceaccounts'] } };
  const created = await fetch(`${api.url}/v1/backups`, { method: 'POST', headers, body: JSON.stringify(body) });
  expect(created.status).toBe(201);
  for (let i = 0; ; i++) {
    const phase = ((await (await fetch(`${api.url}/v1/backups/${name}`, { headers })).json()) as { phase: string }).phase;
    if (['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled'].includes(phase)) return phase;
    if (i > 600) throw new Error(`backup ${name} did not end (phase ${phase})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  redis = await useTestRedis();
  sim = await startSimulator();
  storageDir = await mkdtemp(join(tmpdir(), 'stowage-metrics-'));
  const loaded = loadConfig({
    REDIS_URL: redis.url,
    KUBECONFIG: sim.kubeconfigPath,
    STOWAGE_STORAGE: storageDir,
    STOWAGE_API_TOKENS: TOKEN,
    STOWAGE_QUEUE_PREFIX: uniquePrefix(),
    STOWAGE_SHUTDOWN_TIMEOUT_MS: '8000',
    LOG_LEVEL: 'error',
  });
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  config = loaded.config;
  worker = await startWorkerService({ config, logger, port: 0 });
  worker.markReady();
}, 60_000);

afterAll(async () => {
  for (const api of [...apis]) await stopApi(api);
  await worker?.stopWorkers();
  await worker?.stopHttp();
  await worker?.stopRedis();
  await sim?.close();
  await redis?.stop();
  if (storageDir) await rm(storageDir, { recursive: true, force: true });
}, 60_000);

describe('counters counted where the event happens', { timeout: 240_000 }, () => {
  it('two api replicas do not double-count; a restarted api does not replay; the worker serves /metrics', async () => {
    const a = await startApi();
    const b = await startApi();
    const names = ['m-1', 'm-2', 'm-3', 'm-4'];
    // Submitted through both replicas; whichever hosts the plan and finalize jobs counts them.
    const phases = await Promise.all(names.map((n, i) => backupUntilDone(i % 2 === 0 ? a : b, n)));
    expect(phases).toEqual(['Completed', 'Completed', 'Completed', 'Completed']);
    const [textA, textB] = await Promise.all([scrape(a.url), scrape(b.url)]);
    const success = (t: string) => sample(t, 'stowage_backup_success_total{schedule=""}');
    const attempts = (t: string) => sample(t, 'stowage_backup_attempt_total{schedule=""}');
    expect(success(textA) + success(textB)).toBe(names.length);
    expect(attempts(textA) + attempts(textB)).toBe(names.length);
    expect(
      sample(textA, 'stowage_backup_duration_seconds_count{schedule=""}') +
        sample(textB, 'stowage_backup_duration_seconds_count{schedule=""}'),
    ).toBe(names.length);
    // The state gauges are the shared truth: the same on both replicas.
    expect(sample(textA, 'stowage_backups{phase="Completed"}')).toBe(names.length);
    expect(sample(textB, 'stowage_backups{phase="Completed"}')).toBe(names.length);

    // Both replicas restarted: the retained Completed backups are not counted again.
    await stopApi(a);
    await stopApi(b);
    const c = await startApi();
    const textC = await scrape(c.url);
    expect(success(textC)).toBe(0);
    expect(attempts(textC)).toBe(0);
    expect(sample(textC, 'stowage_backups{phase="Completed"}')).toBe(names.length);
    // A new backup after the restart counts one, here.
    expect(await backupUntilDone(c, 'm-5')).toBe('Completed');
    expect(success(await scrape(c.url))).toBe(1);

    // Deletion attempts and successes, counted by the process that ran the deletion job: a worker
    // (the repository queue), not the api that took the request.
    const headers = { authorization: `Bearer ${TOKEN}` };
    expect((await fetch(`${c.url}/v1/backups/m-1`, { method: 'DELETE', headers })).status).toBe(200);
    const afterDelete = await scrape(c.url);
    const workerAfterDelete = await scrape(`http://127.0.0.1:${worker.port}`);
    expect(sample(workerAfterDelete, 'stowage_backup_deletion_attempt_total{schedule=""}')).toBe(1);
    expect(sample(workerAfterDelete, 'stowage_backup_deletion_success_total{schedule=""}')).toBe(1);
    expect(sample(afterDelete, 'stowage_backup_deletion_attempt_total{schedule=""}')).toBe(0);
    expect(sample(afterDelete, 'stowage_backups{phase="Completed"}')).toBe(names.length);

    // The worker serves its own registry, as the node agent does (k8s/base/worker.yaml scrapes it).
    const workerMetrics = await fetch(`http://127.0.0.1:${worker.port}/metrics`);
    expect(workerMetrics.status).toBe(200);
    const workerText = await workerMetrics.text();
    expect(workerText).toContain('# TYPE stowage_pod_volume_backup_total counter');
    expect(workerText).toMatch(/^stowage_worker_process_cpu_seconds_total \d/m);
  });
});
