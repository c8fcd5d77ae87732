import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadNodeAgentConfig } from './agent-config.js';

const base = { STOWAGE_NODE_NAME: 'node-a', STOWAGE_REPO_KEY: 'k', STOWAGE_STORAGE: '/srv/stowage' };

describe('loadNodeAgentConfig', () => {
  it('applies the node agent defaults', () => {
    const result = loadNodeAgentConfig(base);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.config).toMatchObject({
      nodeName: 'node-a',
      repoDir: '/srv/stowage/repository',
      kubeletRoot: '/var/lib/kubelet',
      loadConcurrency: {},
      bandwidthBytesPerSec: undefined,
      port: 8082,
    });
  });

  it('keeps the repository beside the backups in the bucket with s3:// storage, or in STOWAGE_REPOSITORY_DIR when set', () => {
    const inBucket = loadNodeAgentConfig({ ...base, STOWAGE_STORAGE: 's3://backups/prod' });
    expect(inBucket.ok && inBucket.config).toMatchObject({ repoDir: 's3://backups/prod/repository', repoInStorage: true });
    const inDir = loadNodeAgentConfig({ ...base, STOWAGE_STORAGE: 's3://backups/prod', STOWAGE_REPOSITORY_DIR: '/mnt/repo' });
    expect(inDir.ok && inDir.config).toMatchObject({ repoDir: '/mnt/repo', repoInStorage: false });
    const local = loadNodeAgentConfig(base);
    expect(local.ok && local.config).toMatchObject({ repoDir: '/srv/stowage/repository', repoInStorage: false });
  });

  it('reads loadConcurrency from a mounted file and the bandwidth limit with a unit', () => {
    const dir = mkdtempSync(join(tmpdir(), 'na-config-'));
    const file = join(dir, 'loadConcurrency');
    writeFileSync(file, '{"globalConfig": 3}');
    const result = loadNodeAgentConfig({ ...base, STOWAGE_LOAD_CONCURRENCY_FILE: file, STOWAGE_BANDWIDTH_LIMIT: '50MiB', PORT: '9000' });
    expect(result.ok && result.config).toMatchObject({
      loadConcurrency: { globalConfig: 3 },
      bandwidthBytesPerSec: 50 * 1024 * 1024,
      port: 9000,
    });
  });

  it('lists every problem at once, shared and node-agent ones, without echoing the key', () => {
    const result = loadNodeAgentConfig({
      STOWAGE_LOAD_CONCURRENCY: '{"globalConfig": "x"}',
      STOWAGE_BANDWIDTH_LIMIT: 'fast',
    });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const text = result.problems.join('\n');
    expect(text).toContain('STOWAGE_NODE_NAME: is required by the node agent');
    expect(text).toContain('STOWAGE_REPO_KEY: is required by the node agent');
    expect(text).toContain('STOWAGE_LOAD_CONCURRENCY.globalConfig must be a whole number');
    expect(text).toContain('STOWAGE_BANDWIDTH_LIMIT: "fast" is not a byte rate');
  });

  it('refuses both loadConcurrency sources at once and an unreadable file', () => {
    const both = loadNodeAgentConfig({ ...base, STOWAGE_LOAD_CONCURRENCY: '{}', STOWAGE_LOAD_CONCURRENCY_FILE: '/x' });
    expect(!both.ok && both.problems).toEqual(['STOWAGE_LOAD_CONCURRENCY and STOWAGE_LOAD_CONCURRENCY_FILE are both set; set only one']);
    const missing = loadNodeAgentConfig({ ...base, STOWAGE_LOAD_CONCURRENCY_FILE: '/nonexistent/load.json' });
    expect(!missing.ok && missing.problems[0]).toContain('STOWAGE_LOAD_CONCURRENCY_FILE (/nonexistent/load.json): cannot be read: ENOENT');
  });
});
