import { describe, expect, it } from 'vitest';
import { formatConfigProblems, loadConfig, loadConfigOrExit } from './config.js';

describe('loadConfig', () => {
  it('gives every variable a default and nests the result, frozen', () => {
    const result = loadConfig({});
    if (!result.ok) throw new Error(formatConfigProblems(result.problems));
    const { config } = result;
    expect(config).toMatchObject({
      redis: { url: undefined, queuePrefix: '{stowage}' },
      kube: { kubeconfig: undefined, namespace: 'stowage' },
      storage: { kind: 'filesystem' },
      api: { port: 8080, host: '0.0.0.0', auth: 'enabled', tokens: [], kubeTokens: false, controller: false },
      concurrency: { block: 4, watch: 50, hook: 4 },
      pipeline: { blocksInFlightPerBackup: 1_000, namespaceListsMax: 10 },
      log: { level: 'info' },
      shutdown: { timeoutMs: 25_000 },
    });
    expect(config.storage).toMatchObject({ kind: 'filesystem', path: expect.stringMatching(/\/stowage-data$/) });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.api.tokens)).toBe(true);
    expect(() => {
      (config.concurrency as { block: number }).block = 9;
    }).toThrow(TypeError);
  });

  it('reads values, trims them, treats blank as unset and accepts file:// storage', () => {
    const result = loadConfig({
      REDIS_URL: 'redis://redis:6379/0',
      STOWAGE_STORAGE: 'file:///var/lib/stowage',
      STOWAGE_API_TOKENS: ' a-token , second ,, ',
      STOWAGE_AUTH: 'TOKENS',
      STOWAGE_BLOCK_CONCURRENCY: ' 2 ',
      STOWAGE_NAMESPACE: '',
      PORT: '0',
      HOST: ' 127.0.0.1 ',
      LOG_LEVEL: 'debug',
    });
    if (!result.ok) throw new Error(formatConfigProblems(result.problems));
    expect(result.config.redis.url).toBe('redis://redis:6379/0');
    expect(result.config.storage).toEqual({ kind: 'filesystem', path: '/var/lib/stowage' });
    expect(result.config.api).toEqual({
      port: 0,
      host: '127.0.0.1',
      auth: 'enabled',
      tokens: ['a-token', 'second'],
      kubeTokens: false,
      controller: false,
    });
    expect(result.config.concurrency.block).toBe(2);
    expect(result.config.kube.namespace).toBe('stowage');
    expect(result.config.log.level).toBe('debug');
  });

  it('STOWAGE_PRUNE_GRACE: 24h by default, a duration otherwise, a clear problem for anything else', () => {
    const byDefault = loadConfig({});
    if (!byDefault.ok) throw new Error(formatConfigProblems(byDefault.problems));
    expect(byDefault.config.repository.pruneGraceMs).toBe(24 * 3_600_000);
    const set = loadConfig({ STOWAGE_PRUNE_GRACE: ' 90m ' });
    if (!set.ok) throw new Error(formatConfigProblems(set.problems));
    expect(set.config.repository.pruneGraceMs).toBe(90 * 60_000);
    const bad = loadConfig({ STOWAGE_PRUNE_GRACE: 'a day' });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.problems[0]?.message).toMatch(/^STOWAGE_PRUNE_GRACE: must be a duration such as 24h/);
  });

  it("PORT unset takes the service default; the job lock timing is BullMQ's unless set", () => {
    const worker = loadConfig({}, { defaultPort: 8081 });
    if (!worker.ok) throw new Error(formatConfigProblems(worker.problems));
    expect(worker.config.api.port).toBe(8081);
    expect(worker.config.jobLocks).toEqual({});
    const set = loadConfig(
      { PORT: '9000', STOWAGE_LOCK_DURATION_MS: '4000', STOWAGE_STALLED_INTERVAL_MS: ' 1500 ' },
      { defaultPort: 8081 },
    );
    if (!set.ok) throw new Error(formatConfigProblems(set.problems));
    expect(set.config.api.port).toBe(9000);
    expect(set.config.jobLocks).toEqual({ durationMs: 4000, stalledIntervalMs: 1500 });
    const blank = loadConfig({ STOWAGE_LOCK_DURATION_MS: ' ', STOWAGE_STALLED_INTERVAL_MS: '' });
    expect(blank.ok && blank.config.jobLocks).toEqual({});
  });

  it('names each bad job lock timing variable', () => {
    const result = loadConfig({ STOWAGE_LOCK_DURATION_MS: '4s', STOWAGE_STALLED_INTERVAL_MS: '10' });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems.map((p) => p.message)).toEqual([
      expect.stringMatching(/^STOWAGE_LOCK_DURATION_MS: must be a whole number from 500 to 600000/),
      expect.stringMatching(/^STOWAGE_STALLED_INTERVAL_MS: must be at least 500/),
    ]);
  });

  it('reports every problem at once, each with the variable and a fix', () => {
    const result = loadConfig({
      REDIS_URL: 'localhost:6379',
      STOWAGE_STORAGE: 's3://Bad_Bucket/prefix',
      STOWAGE_AUTH: 'maybe',
      STOWAGE_BLOCK_CONCURRENCY: 'four',
      STOWAGE_WATCH_CONCURRENCY: '0',
      STOWAGE_HOOK_CONCURRENCY: '1000000',
      STOWAGE_NODE_NAME: 'Node_1',
      STOWAGE_NAMESPACE: 'Not A Namespace',
      STOWAGE_QUEUE_PREFIX: 'stowage',
      PORT: '70000',
      HOST: 'every-interface',
      LOG_LEVEL: 'loud',
      STOWAGE_SHUTDOWN_TIMEOUT_MS: '-5',
    });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems.map((p) => p.variable).sort()).toEqual(
      [
        'REDIS_URL',
        'STOWAGE_STORAGE',
        'STOWAGE_AUTH',
        'STOWAGE_BLOCK_CONCURRENCY',
        'STOWAGE_WATCH_CONCURRENCY',
        'STOWAGE_HOOK_CONCURRENCY',
        'STOWAGE_NODE_NAME',
        'STOWAGE_NAMESPACE',
        'STOWAGE_QUEUE_PREFIX',
        'PORT',
        'HOST',
        'LOG_LEVEL',
        'STOWAGE_SHUTDOWN_TIMEOUT_MS',
      ].sort(),
    );
    const byVar = Object.fromEntries(result.problems.map((p) => [p.variable, p.message]));
    expect(byVar.REDIS_URL).toMatch(/^REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL/);
    expect(byVar.STOWAGE_STORAGE).toMatch(
      /^STOWAGE_STORAGE: bucket "Bad_Bucket" is not a valid S3 bucket name .*use s3:\/\/bucket or s3:\/\/bucket\/prefix$/,
    );
    expect(byVar.STOWAGE_BLOCK_CONCURRENCY).toMatch(/whole number from 1 to 1000/);
    expect(byVar.STOWAGE_HOOK_CONCURRENCY).toMatch(/at most 1000/);
    expect(byVar.LOG_LEVEL).toMatch(/one of fatal, error, warn, info, debug, trace, silent/);
  });

  it('reads s3:// storage with its endpoint, region and path style; path style defaults on with an endpoint', () => {
    const minio = loadConfig({
      STOWAGE_STORAGE: 's3://stowage-backups/prod/cluster-a/',
      STOWAGE_S3_ENDPOINT: 'http://minio:9000',
      STOWAGE_S3_REGION: 'eu-west-1',
    });
    if (!minio.ok) throw new Error(formatConfigProblems(minio.problems));
    expect(minio.config.storage).toEqual({
      kind: 's3',
      bucket: 'stowage-backups',
      prefix: 'prod/cluster-a',
      endpoint: 'http://minio:9000',
      region: 'eu-west-1',
      forcePathStyle: true,
    });
    const aws = loadConfig({ STOWAGE_STORAGE: 's3://stowage-backups' });
    if (!aws.ok) throw new Error(formatConfigProblems(aws.problems));
    expect(aws.config.storage).toEqual({ kind: 's3', bucket: 'stowage-backups', prefix: '', forcePathStyle: false });
    const forced = loadConfig({ STOWAGE_STORAGE: 's3://b-1/p', STOWAGE_S3_FORCE_PATH_STYLE: 'TRUE' });
    expect(forced.ok && forced.config.storage).toMatchObject({ kind: 's3', forcePathStyle: true });
  });

  it('lists every S3 setting problem at once, each naming its variable', () => {
    const bad = loadConfig({
      STOWAGE_STORAGE: 's3://ab/x//../y',
      STOWAGE_S3_ENDPOINT: 'minio:9000',
      STOWAGE_S3_REGION: 'EU West',
      STOWAGE_S3_FORCE_PATH_STYLE: 'yes',
    });
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.problems.map((p) => p.message)).toEqual([
      expect.stringMatching(
        /^STOWAGE_STORAGE: bucket "ab" is not a valid S3 bucket name .*; prefix "x\/\/\.\.\/y" must be '\/'-separated names/,
      ),
      expect.stringMatching(/^STOWAGE_S3_ENDPOINT: must be an http:\/\/ or https:\/\/ URL/),
      expect.stringMatching(/^STOWAGE_S3_REGION: must be a region name/),
      expect.stringMatching(/^STOWAGE_S3_FORCE_PATH_STYLE: must be true or false/),
    ]);
    const unknownScheme = loadConfig({ STOWAGE_STORAGE: 'gs://bucket/prefix' });
    expect(!unknownScheme.ok && unknownScheme.problems[0]?.message).toBe(
      'STOWAGE_STORAGE: scheme gs:// is not supported; use a directory path, file:///absolute/path or s3://bucket/prefix',
    );
    const strayS3 = loadConfig({ STOWAGE_STORAGE: '/var/lib/stowage', STOWAGE_S3_ENDPOINT: 'http://minio:9000' });
    expect(!strayS3.ok && strayS3.problems.map((p) => p.message)).toEqual([
      'STOWAGE_S3_ENDPOINT: is only used with STOWAGE_STORAGE=s3://bucket/prefix; unset it or use S3 storage',
    ]);
  });

  it("enforces a service's required variables, without echoing secrets", () => {
    const result = loadConfig(
      { STOWAGE_REPO_KEY: ' ' },
      { require: ['STOWAGE_NODE_NAME', 'STOWAGE_REPO_KEY', 'REDIS_URL'], service: 'node agent' },
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems.map((p) => p.message)).toEqual([
      'STOWAGE_NODE_NAME: is required by the node agent; set it from the pod spec: env valueFrom fieldRef spec.nodeName',
      'STOWAGE_REPO_KEY: is required by the node agent; set it from the repository key Secret; there is no default key',
      'REDIS_URL: is required by the node agent; set it to the Redis URL, e.g. redis://redis:6379',
    ]);
  });

  it('lets STOWAGE_KUBE_AUTH=enabled satisfy a required STOWAGE_API_TOKENS (users bring Kubernetes tokens)', () => {
    const kube = loadConfig({ STOWAGE_KUBE_AUTH: 'enabled' }, { require: ['STOWAGE_API_TOKENS'] });
    expect(kube.ok && kube.config.api).toMatchObject({ auth: 'enabled', tokens: [], kubeTokens: true });
    const bad = loadConfig({ STOWAGE_KUBE_AUTH: 'maybe' });
    expect(bad.ok ? [] : bad.problems.map((p) => p.variable)).toEqual(['STOWAGE_KUBE_AUTH']);
  });

  it('lets STOWAGE_AUTH=disabled satisfy a required STOWAGE_API_TOKENS', () => {
    expect(loadConfig({}, { require: ['STOWAGE_API_TOKENS'] }).ok).toBe(false);
    expect(loadConfig({ STOWAGE_AUTH: 'disabled' }, { require: ['STOWAGE_API_TOKENS'] }).ok).toBe(true);
    const withTokens = loadConfig({ STOWAGE_API_TOKENS: 'super-secret-token' }, { require: ['STOWAGE_API_TOKENS'] });
    expect(withTokens.ok).toBe(true);
    const bad = loadConfig({ STOWAGE_API_TOKENS: 'super-secret-token', STOWAGE_REPO_KEY: 'repo-secret', PORT: 'x' });
    expect(JSON.stringify(bad)).not.toMatch(/super-secret-token|repo-secret/);
  });
});

describe('loadConfigOrExit', () => {
  it('prints every problem and exits 1', () => {
    let printed = '';
    let code: number | undefined;
    expect(() =>
      loadConfigOrExit(
        { PORT: 'x', LOG_LEVEL: 'loud' },
        {
          write: (text) => {
            printed += text;
          },
          exit: (c) => {
            code = c;
            throw new Error('exited');
          },
        },
      ),
    ).toThrow('exited');
    expect(code).toBe(1);
    expect(printed).toContain('2 problem(s)');
    expect(printed).toContain('  - PORT: ');
    expect(printed).toContain('  - LOG_LEVEL: ');
  });
  it('reads the dispatch window per backup (default 1000, 0 = off) and names it when invalid', () => {
    const base = { STOWAGE_STORAGE: '/tmp/stowage' };
    const byDefault = loadConfig(base);
    expect(byDefault.ok && byDefault.config.pipeline.blocksInFlightPerBackup).toBe(1000);
    const off = loadConfig({ ...base, STOWAGE_BLOCKS_IN_FLIGHT_PER_BACKUP: '0' });
    expect(off.ok && off.config.pipeline.blocksInFlightPerBackup).toBe(0);
    const bad = loadConfig({ ...base, STOWAGE_BLOCKS_IN_FLIGHT_PER_BACKUP: 'many' });
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.problems.map((p) => p.variable)).toEqual(['STOWAGE_BLOCKS_IN_FLIGHT_PER_BACKUP']);
    expect(bad.problems[0]?.message).toMatch(/^STOWAGE_BLOCKS_IN_FLIGHT_PER_BACKUP: .*whole number from 0/);
  });

  it("reads the restore plan's heap cap (default 256 MiB, 64 at least) and names it when invalid", () => {
    const base = { STOWAGE_STORAGE: '/tmp/stowage' };
    const byDefault = loadConfig(base);
    expect(byDefault.ok && byDefault.config.restore.planHeapMb).toBe(256);
    const more = loadConfig({ ...base, STOWAGE_RESTORE_PLAN_HEAP_MB: '2048' });
    expect(more.ok && more.config.restore.planHeapMb).toBe(2048);
    const small = loadConfig({ ...base, STOWAGE_RESTORE_PLAN_HEAP_MB: '32' });
    expect(small.ok).toBe(false);
    if (small.ok) return;
    expect(small.problems.map((p) => p.variable)).toEqual(['STOWAGE_RESTORE_PLAN_HEAP_MB']);
    expect(small.problems[0]?.message).toMatch(/^STOWAGE_RESTORE_PLAN_HEAP_MB: must be at least 64/);
  });

  it('reads how many named namespaces a plan lists one by one (default 10, 0 = never) and names it when invalid', () => {
    const base = { STOWAGE_STORAGE: '/tmp/stowage' };
    const byDefault = loadConfig(base);
    expect(byDefault.ok && byDefault.config.pipeline.namespaceListsMax).toBe(10);
    const off = loadConfig({ ...base, STOWAGE_PLAN_NAMESPACE_LISTS_MAX: '0' });
    expect(off.ok && off.config.pipeline.namespaceListsMax).toBe(0);
    const bad = loadConfig({ ...base, STOWAGE_PLAN_NAMESPACE_LISTS_MAX: '-1' });
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.problems.map((p) => p.variable)).toEqual(['STOWAGE_PLAN_NAMESPACE_LISTS_MAX']);
  });

  it('reads the queues a worker hosts (default all; the backup and restore Deployments split them) and names a bad list', () => {
    const base = { STOWAGE_STORAGE: '/tmp/stowage' };
    const byDefault = loadConfig(base);
    expect(byDefault.ok && byDefault.config.worker.queues).toEqual(['item-blocks', 'pvb-watch', 'hooks', 'restore-items', 'repository']);
    const restorer = loadConfig({ ...base, STOWAGE_WORKER_QUEUES: ' restore-items ' });
    expect(restorer.ok && restorer.config.worker.queues).toEqual(['restore-items']);
    const backup = loadConfig({ ...base, STOWAGE_WORKER_QUEUES: 'item-blocks,pvb-watch,hooks' });
    expect(backup.ok && backup.config.worker.queues).toEqual(['item-blocks', 'pvb-watch', 'hooks']);
    for (const value of ['restores', 'hooks,hooks', 'item-blocks,,hooks']) {
      const bad = loadConfig({ ...base, STOWAGE_WORKER_QUEUES: value });
      expect(bad.ok, value).toBe(false);
      if (bad.ok) continue;
      expect(bad.problems.map((p) => p.variable)).toEqual(['STOWAGE_WORKER_QUEUES']);
      expect(bad.problems[0]?.message).toMatch(
        /STOWAGE_WORKER_QUEUES: (must be a comma-separated list of item-blocks, pvb-watch, hooks, restore-items, repository|names a queue twice)/,
      );
    }
  });

  it('reads the restore-wait image: the deployed node agent image, pinned by tag or digest, never :latest', () => {
    const base = { STOWAGE_STORAGE: '/tmp/stowage' };
    const byDefault = loadConfig(base);
    expect(byDefault.ok && byDefault.config.restore.waitImage).toBe('stowage/node-agent:0.1.0');
    for (const image of [
      'registry.example.com:5000/stowage/node-agent:1.2.3',
      `stowage/node-agent@sha256:${'a'.repeat(64)}`,
      'stowage/node-agent:dev',
    ]) {
      const read = loadConfig({ ...base, STOWAGE_RESTORE_WAIT_IMAGE: image });
      expect(read.ok && read.config.restore.waitImage, image).toBe(image);
    }
    for (const [image, why] of [
      ['stowage/node-agent:latest', /must not be :latest/],
      ['stowage/node-agent', /must name a tag or a digest/],
      ['registry.example.com:5000/stowage/node-agent', /must name a tag or a digest/],
      ['not an image', /must be an image reference/],
    ] as const) {
      const bad = loadConfig({ ...base, STOWAGE_RESTORE_WAIT_IMAGE: image });
      expect(bad.ok, image).toBe(false);
      if (bad.ok) continue;
      expect(new Set(bad.problems.map((p) => p.variable))).toEqual(new Set(['STOWAGE_RESTORE_WAIT_IMAGE']));
      expect(bad.problems.map((p) => p.message).join('\n')).toMatch(why);
    }
  });

  it('reads the configurable spec limits (defaults 1000 namespaces, 500 resources, 500 hooks, 30m hook timeout) and names a bad one', () => {
    const base = { STOWAGE_STORAGE: '/tmp/stowage' };
    const byDefault = loadConfig(base);
    expect(byDefault.ok && byDefault.config.specLimits).toEqual({
      namespaces: 1000,
      resources: 500,
      hooks: 500,
      maxHookTimeoutMs: 1_800_000,
    });
    const raised = loadConfig({ ...base, STOWAGE_SPEC_MAX_NAMESPACES: '5000', STOWAGE_MAX_HOOK_TIMEOUT: '2h' });
    expect(raised.ok && raised.config.specLimits).toMatchObject({ namespaces: 5000, maxHookTimeoutMs: 7_200_000 });
    const bad = loadConfig({ ...base, STOWAGE_SPEC_MAX_HOOKS: '0', STOWAGE_MAX_HOOK_TIMEOUT: '5h' });
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.problems.map((p) => p.variable).sort()).toEqual(['STOWAGE_MAX_HOOK_TIMEOUT', 'STOWAGE_SPEC_MAX_HOOKS']);
    expect(bad.problems.find((p) => p.variable === 'STOWAGE_MAX_HOOK_TIMEOUT')?.message).toContain('at most 4h');
  });

  it('reads the write rate limit per token (default 120 per 1m; 0 = none) and names a bad one', () => {
    const base = { STOWAGE_STORAGE: '/tmp/stowage' };
    const byDefault = loadConfig(base);
    expect(byDefault.ok && byDefault.config.writeRateLimit).toEqual({ max: 120, windowMs: 60_000 });
    const set = loadConfig({ ...base, STOWAGE_WRITE_RATE_LIMIT: '0', STOWAGE_WRITE_RATE_WINDOW: '10s' });
    expect(set.ok && set.config.writeRateLimit).toEqual({ max: 0, windowMs: 10_000 });
    const bad = loadConfig({ ...base, STOWAGE_WRITE_RATE_LIMIT: '-1', STOWAGE_WRITE_RATE_WINDOW: '10ms' });
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.problems.map((p) => p.variable).sort()).toEqual(['STOWAGE_WRITE_RATE_LIMIT', 'STOWAGE_WRITE_RATE_WINDOW']);
  });

  it('names a Redis Cluster by REDIS_URL=redis+cluster://… or STOWAGE_REDIS_CLUSTER_NODES, not both', () => {
    const byUrl = loadConfig({ REDIS_URL: 'redis+cluster://:pw@10.0.0.1:7000,redis-1:7001' });
    expect(byUrl.ok && byUrl.config.redis.url).toBe('redis+cluster://:pw@10.0.0.1:7000,redis-1:7001');
    const byNodes = loadConfig({ STOWAGE_REDIS_CLUSTER_NODES: 'redis-0:6379,redis-1:6379' }, { require: ['REDIS_URL'], service: 'worker' });
    expect(byNodes.ok && byNodes.config.redis.url).toBe('redis+cluster://redis-0:6379,redis-1:6379');

    const bad = loadConfig({ REDIS_URL: 'redis+cluster://redis-0,redis-1:x', STOWAGE_REDIS_CLUSTER_NODES: 'redis-0' });
    expect(bad.ok).toBe(false);
    const messages = bad.ok ? [] : bad.problems.map((p) => p.message);
    expect(messages).toEqual([
      expect.stringMatching(/^REDIS_URL: .*redis\+cluster:\/\/host:port,host:port/),
      expect.stringMatching(/^STOWAGE_REDIS_CLUSTER_NODES: must be comma-separated host:port/),
    ]);
    const both = loadConfig({ REDIS_URL: 'redis://r:6379', STOWAGE_REDIS_CLUSTER_NODES: 'r:7000' });
    expect(both.ok ? [] : both.problems.map((p) => p.message)).toEqual([expect.stringMatching(/set only one of them/)]);
  });
});
