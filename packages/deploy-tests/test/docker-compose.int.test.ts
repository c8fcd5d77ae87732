import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { COMPOSE_HINT, REPO_ROOT, runTool } from './run-tool.js';

interface ComposeService {
  image?: string;
  command?: string[] | string;
  entrypoint?: string[] | string;
  environment?: Record<string, string | null>;
  healthcheck?: { test: string[] | string };
  deploy?: { replicas?: number };
  depends_on?: Record<string, { condition: string }>;
  volumes?: (string | { source?: string; target: string; read_only?: boolean })[];
  stop_grace_period?: string;
  read_only?: boolean;
  cap_drop?: string[];
}
interface ComposeFile {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

const COMPOSE_FILE = join(REPO_ROOT, 'docker-compose.yml');
let compose: ComposeFile;

/** `docker-compose config` of a file, resolved against the repository root (for build contexts). */
function composeConfig(file: string, ...extra: string[]) {
  return runTool('docker-compose', ['--project-directory', REPO_ROOT, '-f', file, 'config', ...extra], COMPOSE_HINT);
}

function volumeMount(service: ComposeService, target: string) {
  for (const volume of service.volumes ?? []) {
    if (typeof volume === 'string') {
      const [source, mountTarget, mode] = volume.split(':');
      if (mountTarget === target) return { source, readOnly: mode === 'ro' };
    } else if (volume.target === target) {
      return { source: volume.source, readOnly: volume.read_only === true };
    }
  }
  return undefined;
}

function seconds(duration: string | undefined): number {
  const match = /^(\d+)s$/.exec(duration ?? '');
  if (!match) throw new Error(`unexpected duration ${duration}`);
  return Number(match[1]);
}

beforeAll(async () => {
  const result = await composeConfig(COMPOSE_FILE);
  if (result.exitCode !== 0) throw new Error(`docker-compose config failed (exit ${result.exitCode}):\n${result.stderr}`);
  compose = parse(result.stdout) as ComposeFile;
});

describe('docker-compose.yml', () => {
  it('is accepted by docker-compose config -q', async () => {
    const result = await composeConfig(COMPOSE_FILE, '-q');
    expect(result.stderr).toBe('');
    expect(result.exitCode).toBe(0);
  });

  it('and docker-compose config -q rejects a broken file, so acceptance means something', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'stowage-compose-'));
    try {
      const broken = (await readFile(COMPOSE_FILE, 'utf8')).replace('replicas: 2', 'replicas: two');
      expect(broken).toContain('replicas: two');
      await writeFile(join(dir, 'docker-compose.yml'), broken);
      const result = await composeConfig(join(dir, 'docker-compose.yml'), '-q');
      expect(result.exitCode).not.toBe(0);
      expect(result.stderr).toMatch(/replicas/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('runs Redis with AOF, noeviction and a redis-cli ping healthcheck', () => {
    const redis = compose.services.redis!;
    const command = Array.isArray(redis.command) ? redis.command.join(' ') : (redis.command ?? '');
    expect(command).toContain('--appendonly yes');
    expect(command).toContain('--maxmemory-policy noeviction');
    expect(redis.healthcheck?.test).toEqual(['CMD', 'redis-cli', 'ping']);
    expect(volumeMount(redis, '/data')?.source).toBe('redis-data');
  });

  it('runs two workers and three node agents, one per simulated node, with its data root writable for restores', () => {
    expect(compose.services.worker?.deploy?.replicas).toBe(2);
    const agents = Object.entries(compose.services).filter(([, service]) => service.environment?.STOWAGE_NODE_NAME);
    expect(agents.map(([, service]) => service.environment?.STOWAGE_NODE_NAME).sort()).toEqual(['node-a', 'node-b', 'node-c']);
    for (const [name, service] of agents) {
      const node = service.environment!.STOWAGE_NODE_NAME;
      const simData = volumeMount(service, '/var/lib/stowage/sim');
      expect(simData, name).toEqual({ source: 'sim-data', readOnly: false });
      expect(service.environment?.STOWAGE_KUBELET_ROOT, name).toBe(`/var/lib/stowage/sim/${node}`);
    }
    // the simulator writes into that same volume and the kubeconfig everyone reads
    expect(volumeMount(compose.services['kube-sim']!, '/var/lib/stowage/sim')).toEqual({ source: 'sim-data', readOnly: false });
  });

  it('keeps backups and the repository in MinIO (s3://) and shares no storage volume, only the simulator kubeconfig', () => {
    const stowage = Object.entries(compose.services).filter(([name]) => !['redis', 'kube-sim', 'minio', 'minio-init'].includes(name));
    expect(stowage.length).toBe(5);
    const minio = compose.services.minio!;
    for (const [name, service] of stowage) {
      expect(service.environment?.REDIS_URL, name).toBe('redis://redis:6379');
      expect(service.environment?.STOWAGE_STORAGE, name).toBe('s3://stowage/dev');
      expect(service.environment?.STOWAGE_S3_ENDPOINT, name).toBe('http://minio:9000');
      expect(service.environment?.STOWAGE_S3_FORCE_PATH_STYLE, name).toBe('true');
      // The AWS chain's credentials are MinIO's root user.
      expect(service.environment?.AWS_ACCESS_KEY_ID, name).toBe(minio.environment?.MINIO_ROOT_USER);
      expect(service.environment?.AWS_SECRET_ACCESS_KEY, name).toBe(minio.environment?.MINIO_ROOT_PASSWORD);
      expect(volumeMount(service, '/var/lib/stowage/backups'), name).toBeUndefined(); // no shared backup volume
      expect(service.environment?.KUBECONFIG, name).toBe('/var/lib/stowage/kube/config');
      expect(volumeMount(service, '/var/lib/stowage/kube'), name).toEqual({ source: 'kubeconfig', readOnly: true });
      expect(service.depends_on, name).toEqual({
        redis: { condition: 'service_healthy' },
        'kube-sim': { condition: 'service_healthy' },
        'minio-init': { condition: 'service_completed_successfully' },
      });
      const timeoutMs = Number(service.environment?.STOWAGE_SHUTDOWN_TIMEOUT_MS);
      expect(seconds(service.stop_grace_period), name).toBeGreaterThan(timeoutMs / 1000);
      expect(service.read_only, name).toBe(true);
      expect(service.cap_drop, name).toEqual(['ALL']);
      // The node agents keep the volume repository in the bucket too.
      expect(service.environment?.STOWAGE_REPOSITORY_DIR, name).toBeUndefined();
      expect(
        (service.volumes ?? []).map((v) => (typeof v === 'string' ? v.split(':')[0] : v.source)),
        name,
      ).not.toContain('repository');
    }
    expect(compose.services['kube-sim']?.healthcheck?.test).toBeDefined();
  });

  it('runs MinIO with a readiness healthcheck and creates the bucket before Stowage starts', () => {
    const minio = compose.services.minio!;
    expect(minio.image).toMatch(/minio\/minio:RELEASE\./);
    expect(minio.healthcheck?.test).toEqual(['CMD', 'mc', 'ready', 'local']);
    expect(volumeMount(minio, '/data')?.source).toBe('minio-data');
    const init = compose.services['minio-init']!;
    expect(init.depends_on).toEqual({ minio: { condition: 'service_healthy' } });
    const script = JSON.stringify(init.entrypoint ?? init.command);
    expect(script).toContain('mc mb --ignore-existing local/stowage');
  });

  it('has the simulator listen on its service name and write the kubeconfig the others read', () => {
    const command = compose.services['kube-sim']?.command;
    expect(Array.isArray(command)).toBe(true);
    const flag = (name: string) => (command as string[])[(command as string[]).indexOf(name) + 1];
    // the kubeconfig's server is https://<host>:<https port>, so the host must be reachable from the other containers
    expect(flag('--host')).toBe('kube-sim');
    expect(flag('--kubeconfig')).toBe(compose.services.api?.environment?.KUBECONFIG);
    expect(flag('--data-root')).toBe('/var/lib/stowage/sim');
  });
});
