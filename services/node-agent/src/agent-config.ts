import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ConfigProblem, loadConfig, type StowageConfig } from '@stowage/platform';
import { parseByteRate } from './byte-rate.js';
import { type LoadConcurrencyConfig, parseLoadConcurrency } from './load-concurrency.js';

/** What the node agent reads from its environment beyond the shared Stowage config. */
export interface NodeAgentConfig {
  readonly shared: StowageConfig;
  readonly nodeName: string;
  readonly repoKey: string;
  /**
   * `<STOWAGE_STORAGE>/repository` for a directory, or STOWAGE_REPOSITORY_DIR when set. With
   * s3:// storage and no STOWAGE_REPOSITORY_DIR the repository is in the bucket and this only
   * names it (`s3://bucket/prefix/repository`).
   */
  readonly repoDir: string;
  /** True when the repository lives in the object store of STOWAGE_STORAGE (s3://), beside the backups. */
  readonly repoInStorage: boolean;
  readonly kubeletRoot: string;
  readonly loadConcurrency: LoadConcurrencyConfig;
  readonly loadConcurrencyWarnings: readonly string[];
  readonly bandwidthBytesPerSec: number | undefined;
  /** How long a claimed PVR waits for its pod's volume directory. */
  readonly volumeDirTimeoutMs: number;
  readonly port: number;
}

export const DEFAULT_KUBELET_ROOT = '/var/lib/kubelet';
export const DEFAULT_NODE_AGENT_PORT = 8082;
export const DEFAULT_VOLUME_DIR_TIMEOUT_MS = 5 * 60_000;

export type NodeAgentConfigResult = { ok: true; config: NodeAgentConfig } | { ok: false; problems: string[] };

const blank = (value: string | undefined) => (value === undefined || value.trim() === '' ? undefined : value.trim());

/** Every problem at once, like loadConfig: the shared variables plus the node agent's own. */
export function loadNodeAgentConfig(env: Readonly<Record<string, string | undefined>>): NodeAgentConfigResult {
  const shared = loadConfig(env, {
    require: ['STOWAGE_NODE_NAME', 'STOWAGE_REPO_KEY'],
    service: 'node agent',
    defaultPort: DEFAULT_NODE_AGENT_PORT,
  });
  const problems: string[] = shared.ok ? [] : shared.problems.map((p: ConfigProblem) => p.message);

  const kubeletRoot = blank(env.STOWAGE_KUBELET_ROOT) ?? DEFAULT_KUBELET_ROOT;
  let loadConcurrency: LoadConcurrencyConfig = {};
  let loadConcurrencyWarnings: string[] = [];
  const file = blank(env.STOWAGE_LOAD_CONCURRENCY_FILE);
  const inline = blank(env.STOWAGE_LOAD_CONCURRENCY);
  if (file && inline) {
    problems.push('STOWAGE_LOAD_CONCURRENCY and STOWAGE_LOAD_CONCURRENCY_FILE are both set; set only one');
  } else if (file || inline) {
    let text: string | undefined = inline;
    const source = file ? `STOWAGE_LOAD_CONCURRENCY_FILE (${file})` : 'STOWAGE_LOAD_CONCURRENCY';
    if (file) {
      try {
        text = readFileSync(file, 'utf8');
      } catch (error) {
        problems.push(`${source}: cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
      }
    }
    if (text !== undefined) {
      const parsed = parseLoadConcurrency(text, source);
      if (parsed.ok) {
        loadConcurrency = parsed.config;
        loadConcurrencyWarnings = parsed.warnings;
      } else {
        problems.push(...parsed.problems);
      }
    }
  }
  let bandwidthBytesPerSec: number | undefined;
  const bandwidth = blank(env.STOWAGE_BANDWIDTH_LIMIT);
  if (bandwidth) {
    const parsed = parseByteRate(bandwidth);
    if (parsed.ok) bandwidthBytesPerSec = parsed.bytesPerSec;
    else problems.push(`STOWAGE_BANDWIDTH_LIMIT: ${parsed.message}`);
  }
  let volumeDirTimeoutMs = DEFAULT_VOLUME_DIR_TIMEOUT_MS;
  const dirTimeout = blank(env.STOWAGE_RESTORE_VOLUME_DIR_TIMEOUT_MS);
  if (dirTimeout) {
    const value = Number(dirTimeout);
    if (Number.isInteger(value) && value > 0) volumeDirTimeoutMs = value;
    else
      problems.push(
        `STOWAGE_RESTORE_VOLUME_DIR_TIMEOUT_MS must be a whole number of milliseconds above 0, got ${JSON.stringify(dirTimeout)}`,
      );
  }
  const repositoryDir = blank(env.STOWAGE_REPOSITORY_DIR);
  if (!shared.ok || problems.length > 0) return { ok: false, problems };
  const config = shared.config;
  return {
    ok: true,
    config: Object.freeze({
      shared: config,
      nodeName: config.node.name!,
      repoKey: config.repository.key!,
      repoDir:
        repositoryDir ??
        (config.storage.kind === 'filesystem'
          ? join(config.storage.path, 'repository')
          : `s3://${config.storage.bucket}/${config.storage.prefix ? `${config.storage.prefix}/` : ''}repository`),
      repoInStorage: repositoryDir === undefined && config.storage.kind === 's3',
      kubeletRoot,
      loadConcurrency,
      loadConcurrencyWarnings,
      bandwidthBytesPerSec,
      volumeDirTimeoutMs,
      port: config.api.port,
    }),
  };
}
