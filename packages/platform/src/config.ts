import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/*
 * Stowage's whole environment in one zod schema (docs/architecture.md#configuration). `loadConfig` is called once in a
 * service's main.ts, never at import time. It reports every problem at once, each naming the
 * variable and how to fix it, and never echoes a secret's value.
 */

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Blank means unset: `FOO=` in a compose file or a ConfigMap should take the default. */
const blankToUndefined = (value: unknown): unknown => {
  if (typeof value !== 'string') return value;
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
};

const wholeNumber = (min: number, max: number, fallback: number, what: string) =>
  z.preprocess(
    blankToUndefined,
    z
      .string()
      .regex(/^\d+$/, { error: `must be a whole number from ${min} to ${max} (${what}); default ${fallback}` })
      .transform(Number)
      .pipe(
        z
          .number()
          .min(min, { error: `must be at least ${min} (${what})` })
          .max(max, { error: `must be at most ${max} (${what})` }),
      )
      .default(fallback),
  );

/** Like wholeNumber, but unset stays undefined: the consumer (BullMQ, the service) keeps its own default. */
const optionalWholeNumber = (min: number, max: number, what: string) =>
  z.preprocess(
    blankToUndefined,
    z
      .string()
      .regex(/^\d+$/, { error: `must be a whole number from ${min} to ${max} (${what})` })
      .transform(Number)
      .pipe(
        z
          .number()
          .min(min, { error: `must be at least ${min} (${what})` })
          .max(max, { error: `must be at most ${max} (${what})` }),
      )
      .optional(),
  );

const oneOf = <const T extends readonly [string, ...string[]]>(values: T, fallback: T[number], what: string) =>
  z.preprocess(
    (value) => (typeof blankToUndefined(value) === 'string' ? (blankToUndefined(value) as string).toLowerCase() : undefined),
    z.enum(values, { error: `must be one of ${values.join(', ')} (${what}); default ${fallback}` }).default(fallback),
  );

/** The repository's prune grace by default: longer than any backup or restore (the repository's DEFAULT_PRUNE_GRACE_MS). */
const DEFAULT_PRUNE_GRACE_MS = 24 * 3_600_000;

/** `24h`, `30m`, `90s`, `500ms`, `1d` or a number of seconds (what `stowage repo prune --grace` takes). */
const duration = (fallbackMs: number, what: string) =>
  z.preprocess(
    blankToUndefined,
    z
      .string()
      .regex(/^\d+(\.\d+)?(ms|s|m|h|d)?$/, { error: `must be a duration such as 24h, 30m or 90s (${what})` })
      .transform((text) => {
        const [, amount, unit] = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text) as RegExpExecArray;
        return Number(amount) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(unit ?? 's') as 'ms'];
      })
      .optional()
      .transform((ms) => ms ?? fallbackMs),
  );

/**
 * The queues a worker process may host (@stowage/queue's names): the backup workers take
 * item-blocks, pvb-watch, hooks and repository (deletions and prunes: they hold the repository
 * key), the restore workers (their own Deployment and identity) `restore-items`.
 */
export const WORKER_QUEUES = ['item-blocks', 'pvb-watch', 'hooks', 'restore-items', 'repository'] as const;
export type WorkerQueue = (typeof WORKER_QUEUES)[number];

/** `STOWAGE_WORKER_QUEUES`: a comma list of WORKER_QUEUES, each once; default all of them. */
const workerQueues = z.preprocess(
  blankToUndefined,
  z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined) return [...WORKER_QUEUES];
      const names = text.split(',').map((name) => name.trim());
      const unknown = names.filter((name) => !(WORKER_QUEUES as readonly string[]).includes(name));
      if (unknown.length > 0 || names.length === 0) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a comma-separated list of ${WORKER_QUEUES.join(', ')} (the queues this worker process hosts; default all); unknown: ${unknown.map((n) => JSON.stringify(n)).join(', ')}`,
        });
        return z.NEVER;
      }
      if (new Set(names).size !== names.length) {
        ctx.addIssue({ code: 'custom', message: 'names a queue twice; list each queue once' });
        return z.NEVER;
      }
      return names as WorkerQueue[];
    }),
);

/**
 * The restore-wait init container's image when STOWAGE_RESTORE_WAIT_IMAGE is unset: the node
 * agent's image as the base manifests deploy it (k8s/base/kustomization.yaml `images`; the
 * overlays set the variable from the DaemonSet's own image). Never `:latest`.
 */
export const DEFAULT_RESTORE_WAIT_IMAGE = 'stowage/node-agent:0.1.0';

/**
 * The V8 heap cap of a restore plan's own process when STOWAGE_RESTORE_PLAN_HEAP_MB is unset: with
 * the api's ~160 MiB, under the 512Mi its pod may use (k8s/base/api.yaml). A full restore of ~80k
 * objects fits; a larger one fails, naming the setting, instead of the api being OOM-killed.
 */
export const DEFAULT_RESTORE_PLAN_HEAP_MB = 256;

/** `name[:tag][@digest]`, with a tag other than `latest` or a digest: what a pod pulls is fixed. */
const pinnedImage = z.preprocess(
  blankToUndefined,
  z
    .string()
    .max(512, { error: 'must be at most 512 characters (an image reference)' })
    .regex(/^[a-z0-9][a-z0-9._\-/:]*[a-z0-9](:[\w][\w.-]{0,127})?(@sha256:[a-f0-9]{64})?$/i, {
      error: 'must be an image reference such as registry.example.com/stowage/node-agent:0.1.0 (the node agent image as deployed)',
    })
    .refine((ref) => /@sha256:/.test(ref) || /:[\w][\w.-]*$/.test(ref.slice(ref.lastIndexOf('/') + 1)), {
      error: 'must name a tag or a digest (the node agent image as deployed, e.g. stowage/node-agent:0.1.0), not an untagged image',
    })
    .refine((ref) => !/:latest(@|$)/.test(ref.slice(ref.lastIndexOf('/') + 1)), {
      error: 'must not be :latest (a restored pod would run whatever the tag points at then); use the node agent image as deployed',
    })
    .default(DEFAULT_RESTORE_WAIT_IMAGE),
);

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * Where backups and the repository live. `s3`: a bucket and a key prefix inside it ('' for the
 * bucket's root); endpoint, region and path style come from STOWAGE_S3_*, credentials from the
 * standard AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, web identity, …).
 */
export type StorageLocation =
  | { kind: 'filesystem'; path: string }
  | { kind: 's3'; bucket: string; prefix: string; endpoint?: string; region?: string; forcePathStyle: boolean };

const S3_BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** The s3:// form of STOWAGE_STORAGE: `s3://bucket` or `s3://bucket/prefix/inside`. */
function parseS3Storage(value: string, ctx: z.RefinementCtx): StorageLocation | typeof z.NEVER {
  const rest = value.slice('s3://'.length);
  const slash = rest.indexOf('/');
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  const prefix = slash < 0 ? '' : rest.slice(slash + 1).replace(/\/+$/, '');
  const problems: string[] = [];
  if (!S3_BUCKET.test(bucket) || bucket.includes('..') || /^\d+\.\d+\.\d+\.\d+$/.test(bucket)) {
    problems.push(
      `bucket ${JSON.stringify(bucket)} is not a valid S3 bucket name (3-63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit)`,
    );
  }
  if (
    prefix !== '' &&
    prefix.split('/').some((segment) => segment === '' || segment === '.' || segment === '..' || segment.includes('\\'))
  ) {
    problems.push(`prefix ${JSON.stringify(prefix)} must be '/'-separated names without empty, '.' or '..' segments`);
  }
  if (problems.length > 0) {
    ctx.addIssue({ code: 'custom', message: `${problems.join('; ')}; use s3://bucket or s3://bucket/prefix` });
    return z.NEVER;
  }
  // Endpoint, region and path style are filled in by loadConfig from STOWAGE_S3_*.
  return { kind: 's3', bucket, prefix, forcePathStyle: false };
}

/** `STOWAGE_STORAGE`: a directory path, `file://…`, or `s3://bucket[/prefix]`. */
function parseStorage(value: string, ctx: z.RefinementCtx): StorageLocation | typeof z.NEVER {
  if (/^s3:\/\//i.test(value)) return parseS3Storage(value, ctx);
  if (/^file:\/\//i.test(value)) {
    try {
      // file:///abs/path is a URL; file://./rel is accepted as a relative path for convenience.
      const path = value.startsWith('file:///') ? fileURLToPath(value) : value.slice('file://'.length);
      return { kind: 'filesystem', path: resolve(path) };
    } catch {
      ctx.addIssue({ code: 'custom', message: 'is not a valid file:// URL; use file:///absolute/path or a plain path' });
      return z.NEVER;
    }
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    ctx.addIssue({
      code: 'custom',
      message: `scheme ${value.split(':')[0]}:// is not supported; use a directory path, file:///absolute/path or s3://bucket/prefix`,
    });
    return z.NEVER;
  }
  return { kind: 'filesystem', path: resolve(value) };
}

const CLUSTER_URL = /^rediss?\+cluster:\/\/(?:[^@/\s]*@)?[^/?#@\s]+\/?$/;
/** `host:port` or `[v6]:port`, port 1-65535. */
function isHostPort(value: string): boolean {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})\/?$/.exec(value.trim());
  return m !== null && Number(m[2]) >= 1 && Number(m[2]) <= 65_535;
}

/** The single schema of Stowage's environment. Output is flat; `loadConfig` nests it. */
export const stowageEnvSchema = z.object({
  REDIS_URL: z.preprocess(
    blankToUndefined,
    z
      .string()
      .refine(
        (v) =>
          /^rediss?\+cluster:\/\//.test(v)
            ? CLUSTER_URL.test(v) &&
              v
                .replace(/^.*@/, '')
                .replace(/^rediss?\+cluster:\/\//, '')
                .split(',')
                .every(isHostPort)
            : /^rediss?:\/\/[^\s]+$/.test(v) && URL.canParse(v),
        {
          error:
            'must be a redis:// or rediss:// URL, e.g. redis://127.0.0.1:6379, or a Redis Cluster as redis+cluster://host:port,host:port (leave it unset for the demo to start a private redis-server)',
        },
      )
      .optional(),
  ),
  /** Seed nodes of a Redis Cluster, `host:port,host:port` (the same as REDIS_URL=redis+cluster://…). */
  STOWAGE_REDIS_CLUSTER_NODES: z.preprocess(
    blankToUndefined,
    z
      .string()
      .refine((v) => v.split(',').every(isHostPort), {
        error: 'must be comma-separated host:port seed nodes of a Redis Cluster, e.g. redis-0:6379,redis-1:6379',
      })
      .optional(),
  ),
  KUBECONFIG: z.preprocess(blankToUndefined, z.string().optional()),
  STOWAGE_STORAGE: z.preprocess(blankToUndefined, z.string().default('./stowage-data').transform(parseStorage)),
  STOWAGE_S3_ENDPOINT: z.preprocess(
    blankToUndefined,
    z
      .string()
      .refine((v) => /^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(v) && URL.canParse(v), {
        error: 'must be an http:// or https:// URL of an S3-compatible server, e.g. http://minio:9000 (leave it unset for AWS S3)',
      })
      .optional(),
  ),
  STOWAGE_S3_REGION: z.preprocess(
    blankToUndefined,
    z
      .string()
      .regex(/^[a-z0-9-]+$/, { error: 'must be a region name such as us-east-1 (lowercase letters, digits and -)' })
      .optional(),
  ),
  STOWAGE_S3_FORCE_PATH_STYLE: z.preprocess(
    (value) => (typeof blankToUndefined(value) === 'string' ? (blankToUndefined(value) as string).toLowerCase() : undefined),
    z
      .enum(['true', 'false'], {
        error: 'must be true or false (path-style URLs, which MinIO needs); default true when STOWAGE_S3_ENDPOINT is set, else false',
      })
      .optional(),
  ),
  STOWAGE_API_TOKENS: z.preprocess(
    blankToUndefined,
    z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((t) => t.trim())
          .filter((t) => t.length > 0),
      ),
  ),
  // `tokens` is accepted as a synonym of `enabled` (services/api's spelling).
  STOWAGE_AUTH: oneOf(['enabled', 'tokens', 'disabled'], 'enabled', 'bearer-token auth of the API').transform((v) =>
    v === 'disabled' ? ('disabled' as const) : ('enabled' as const),
  ),
  STOWAGE_CONTROLLER: oneOf(
    ['enabled', 'disabled'],
    'disabled',
    'the api reconciles stowage.dev Backup and ClusterBackup resources (one replica at a time, a Lease); needs the CRDs',
  ),
  STOWAGE_KUBE_AUTH: oneOf(
    ['enabled', 'disabled'],
    'disabled',
    'Kubernetes bearer tokens on the API: TokenReview authenticates, SubjectAccessReview on stowage.dev resources authorizes',
  ),
  STOWAGE_BLOCK_CONCURRENCY: wholeNumber(1, 1_000, 4, 'item-block jobs per worker process'),
  STOWAGE_WATCH_CONCURRENCY: wholeNumber(1, 10_000, 50, 'pvb-watch jobs per worker process'),
  STOWAGE_HOOK_CONCURRENCY: wholeNumber(1, 1_000, 4, 'hooks-queue jobs (post-hooks and restore-hooks) per worker process'),
  STOWAGE_RESTORE_ITEMS_CONCURRENCY: wholeNumber(1, 1_000, 8, 'restore-items jobs (item batches) per worker process'),
  STOWAGE_WORKER_QUEUES: workerQueues,
  STOWAGE_RESTORE_WAIT_IMAGE: pinnedImage,
  STOWAGE_RESTORE_PLAN_HEAP_MB: wholeNumber(
    64,
    65_536,
    DEFAULT_RESTORE_PLAN_HEAP_MB,
    "MiB of V8 heap a restore's plan may use, in a process of its own; give the api's pod this much more memory",
  ),
  STOWAGE_RESTORE_MAX_INFLIGHT: wholeNumber(
    1,
    10_000,
    100,
    "API server requests in flight from restores' item jobs, across all worker processes (1 = one item at a time, Velero's way)",
  ),
  STOWAGE_NODE_NAME: z.preprocess(
    blankToUndefined,
    z
      .string()
      .max(253, { error: 'must be at most 253 characters (a Kubernetes node name)' })
      .regex(DNS1123_SUBDOMAIN, { error: "must be a Kubernetes node name (lowercase letters, digits, '-' and '.')" })
      .optional(),
  ),
  STOWAGE_REPO_KEY: z.preprocess(blankToUndefined, z.string().optional()),
  STOWAGE_REPOSITORY_DIR: z.preprocess(blankToUndefined, z.string().optional()),
  STOWAGE_PRUNE_GRACE: duration(
    DEFAULT_PRUNE_GRACE_MS,
    'how long prune keeps retired repository data before deleting it; must exceed the longest backup, so a backup whose fsBackupTimeout is not shorter is refused; default 24h',
  ),
  STOWAGE_BLOCKS_IN_FLIGHT_PER_BACKUP: wholeNumber(
    0,
    1_000_000,
    1_000,
    "a backup's blocks in the queues at once (its dispatch window; 0 = no window, every block is added while planning)",
  ),
  STOWAGE_PLAN_NAMESPACE_LISTS_MAX: wholeNumber(
    0,
    1_000,
    10,
    'a backup naming at most this many namespaces (no globs) lists them one by one instead of every type across the cluster (0 = always across the cluster)',
  ),
  STOWAGE_NAMESPACE: z.preprocess(
    blankToUndefined,
    z
      .string()
      .max(63, { error: 'must be at most 63 characters (a Kubernetes namespace)' })
      .regex(DNS1123_LABEL, { error: "must be a Kubernetes namespace name (lowercase letters, digits and '-')" })
      .default('stowage'),
  ),
  STOWAGE_QUEUE_PREFIX: z.preprocess(
    blankToUndefined,
    z
      .string()
      .regex(/^\{[^{}:]+\}$/, { error: 'must be a Redis Cluster hash tag in braces without ":", e.g. {stowage}' })
      .default('{stowage}'),
  ),
  PORT: optionalWholeNumber(0, 65_535, 'HTTP port of the service; default 8080 for the api, 8081 for a worker, 8082 for a node agent'),
  STOWAGE_LOCK_DURATION_MS: optionalWholeNumber(500, 600_000, "ms before a crashed process's job locks expire; default BullMQ's 30000"),
  STOWAGE_STALLED_INTERVAL_MS: optionalWholeNumber(
    500,
    600_000,
    "ms between a worker's checks for jobs whose locks expired; default BullMQ's 30000",
  ),
  HOST: z.preprocess(
    blankToUndefined,
    z
      .string()
      .refine((v) => isIP(v) !== 0 || v === 'localhost', {
        error:
          'must be an IP address to listen on (0.0.0.0 for every interface, 127.0.0.1 for this machine only, :: for IPv6) or localhost; default 0.0.0.0',
      })
      .default('0.0.0.0'),
  ),
  LOG_LEVEL: oneOf(LOG_LEVELS, 'info', 'pino log level'),
  STOWAGE_BACKUP_SYNC_INTERVAL_MS: wholeNumber(
    0,
    86_400_000,
    60_000,
    'how often the api service syncs its backup catalogue from storage (0 = only at start)',
  ),
  STOWAGE_SPEC_MAX_NAMESPACES: wholeNumber(
    1,
    100_000,
    1_000,
    "entries of a spec's namespace list (included/excluded, a hook set's) and of a restore's namespaceMapping; more is a 400",
  ),
  STOWAGE_SSE_MAX_PER_TOKEN: wholeNumber(
    1,
    10_000,
    20,
    'event streams (SSE) one token may have open on one api process; past it a 429 with Retry-After',
  ),
  STOWAGE_SSE_MAX_STREAMS: wholeNumber(
    1,
    100_000,
    500,
    'event streams (SSE) one api process serves in all (each live one holds a Redis connection)',
  ),
  STOWAGE_WRITE_RATE_LIMIT: wholeNumber(
    0,
    1_000_000,
    120,
    'write requests (POST, PUT, PATCH, DELETE) one token may make per STOWAGE_WRITE_RATE_WINDOW on one api process; past it a 429 with Retry-After (0 = no limit)',
  ),
  STOWAGE_WRITE_RATE_WINDOW: duration(60_000, 'the window STOWAGE_WRITE_RATE_LIMIT counts in; default 1m').refine(
    (ms) => ms >= 1_000 && ms <= 86_400_000,
    { error: 'must be at least 1s and at most 24h' },
  ),
  STOWAGE_SPEC_MAX_RESOURCES: wholeNumber(1, 10_000, 500, "entries of a spec's resource list; more is a 400"),
  STOWAGE_SPEC_MAX_HOOKS: wholeNumber(
    1,
    100_000,
    500,
    "hooks of a spec in all (every hook set's and the backup-level ones); more is a 400",
  ),
  STOWAGE_MAX_HOOK_TIMEOUT: duration(
    30 * 60_000,
    'the longest timeout a spec hook may ask for (it holds a worker slot that long); more is a 400; default 30m',
  ).refine((ms) => ms > 0 && ms <= 4 * 3_600_000, { error: 'must be more than 0 and at most 4h (the longest hook timeout)' }),
  STOWAGE_SHUTDOWN_TIMEOUT_MS: wholeNumber(100, 600_000, 25_000, 'bound on graceful shutdown; keep it below terminationGracePeriodSeconds'),
});

export type StowageEnvVar = keyof z.input<typeof stowageEnvSchema>;
export const STOWAGE_ENV_VARS = Object.keys(stowageEnvSchema.shape) as StowageEnvVar[];

/** The validated configuration: frozen and nested by concern. */
export interface StowageConfig {
  readonly redis: { readonly url: string | undefined; readonly queuePrefix: string };
  readonly kube: { readonly kubeconfig: string | undefined; readonly namespace: string };
  readonly storage: StorageLocation;
  /** `host`: the interface every service's HTTP server listens on (HOST; default all, as containers need). */
  readonly api: {
    readonly port: number;
    readonly host: string;
    readonly auth: 'enabled' | 'disabled';
    readonly tokens: readonly string[];
    /** Users' Kubernetes tokens accepted (TokenReview, then SubjectAccessReview per request); static tokens are cluster-admin equivalents. */
    readonly kubeTokens: boolean;
    /** Reconcile stowage.dev Backup/ClusterBackup resources in this api (leader-elected). */
    readonly controller: boolean;
  };
  readonly concurrency: { readonly block: number; readonly watch: number; readonly hook: number };
  /**
   * BullMQ job locks: a crashed process's active jobs are taken over once their locks expire
   * (`durationMs`) and a live worker's stalled check (every `stalledIntervalMs`) moves them back to
   * wait. Unset: BullMQ's defaults (30 s each).
   */
  readonly jobLocks: { readonly durationMs?: number; readonly stalledIntervalMs?: number };
  /**
   * `blocksInFlightPerBackup`: the dispatch window of each backup (0 = off), decided by plan (the api
   * service); `namespaceListsMax`: plan lists up to this many named namespaces one by one.
   */
  readonly pipeline: {
    readonly blocksInFlightPerBackup: number;
    readonly namespaceListsMax: number;
  };
  /** `waitImage`: the image of the restore-wait init container of restored pods (the node agent's, as deployed). */
  readonly restore: {
    readonly itemsConcurrency: number;
    readonly maxInFlight: number;
    readonly waitImage: string;
    readonly planHeapMb: number;
  };
  /**
   * `queues`: what this worker process hosts (STOWAGE_WORKER_QUEUES). The backup workers (read-only
   * identity) take item-blocks, pvb-watch and hooks; the restore workers, under the identity that may
   * write what a restore creates, restore-items.
   */
  readonly worker: { readonly queues: readonly WorkerQueue[] };
  readonly node: { readonly name: string | undefined };
  /** `pruneGraceMs`: prune deletes retired data only this long after retiring it (STOWAGE_PRUNE_GRACE). */
  readonly repository: { readonly key: string | undefined; readonly pruneGraceMs: number; readonly dir: string | undefined };
  readonly log: { readonly level: LogLevel };
  readonly shutdown: { readonly timeoutMs: number };
  /** Backup sync of the api service (docs/architecture.md#backup-sync): `intervalMs` between passes, 0 = only at start. */
  readonly backupSync: { readonly intervalMs: number };
  /** The configurable bounds on spec lists and sizes the api enforces (core's SpecLimits; the rest are core's defaults). */
  /** Open event streams (SSE) per token and in all on one api process. */
  readonly streams: { readonly perCaller: number; readonly total: number };
  /** Write requests per token per window on one api process (`max` 0: no limit). */
  readonly writeRateLimit: { readonly max: number; readonly windowMs: number };
  readonly specLimits: {
    readonly namespaces: number;
    readonly resources: number;
    readonly hooks: number;
    readonly maxHookTimeoutMs: number;
  };
}

export interface ConfigProblem {
  variable: StowageEnvVar;
  /** What is wrong and how to fix it; never contains a secret's value. */
  message: string;
}

export type ConfigResult = { ok: true; config: StowageConfig } | { ok: false; problems: ConfigProblem[] };

export interface LoadConfigOptions {
  /**
   * Variables this service cannot run without (e.g. the node agent: STOWAGE_NODE_NAME and
   * STOWAGE_REPO_KEY). STOWAGE_API_TOKENS is satisfied by STOWAGE_AUTH=disabled.
   */
  require?: readonly StowageEnvVar[];
  /** Named in "required by" messages. */
  service?: string;
  /** This service's HTTP port when PORT is unset; default 8080 (the api's). */
  defaultPort?: number;
}

const REQUIRED_HINTS: Partial<Record<StowageEnvVar, string>> = {
  REDIS_URL: 'set it to the Redis URL, e.g. redis://redis:6379',
  KUBECONFIG: 'set it to a kubeconfig file path',
  STOWAGE_NODE_NAME: 'set it from the pod spec: env valueFrom fieldRef spec.nodeName',
  STOWAGE_REPO_KEY: 'set it from the repository key Secret; there is no default key',
  STOWAGE_API_TOKENS:
    'set one or more comma-separated tokens (e.g. from `openssl rand -hex 32`), or STOWAGE_KUBE_AUTH=enabled to accept Kubernetes tokens, or STOWAGE_AUTH=disabled to run without auth',
};

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

/** Validates `env` (usually `process.env`) into a frozen nested config, or lists every problem. */
export function loadConfig(env: Readonly<Record<string, string | undefined>>, options: LoadConfigOptions = {}): ConfigResult {
  const raw: Record<string, string | undefined> = {};
  for (const name of STOWAGE_ENV_VARS) raw[name] = env[name];
  const parsed = stowageEnvSchema.safeParse(raw);
  const problems: ConfigProblem[] = [];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const variable = issue.path[0] as StowageEnvVar;
      problems.push({ variable, message: `${variable}: ${issue.message}` });
    }
  }
  const who = options.service ? `the ${options.service}` : 'this service';
  for (const variable of options.require ?? []) {
    if (problems.some((p) => p.variable === variable)) continue;
    const value = blankToUndefined(env[variable]);
    if (variable === 'STOWAGE_API_TOKENS' && parsed.success) {
      if (
        parsed.data.STOWAGE_AUTH === 'disabled' ||
        parsed.data.STOWAGE_API_TOKENS.length > 0 ||
        parsed.data.STOWAGE_KUBE_AUTH === 'enabled'
      )
        continue;
    } else if (value !== undefined) continue;
    if (variable === 'REDIS_URL' && blankToUndefined(env.STOWAGE_REDIS_CLUSTER_NODES) !== undefined) continue;
    const hint = REQUIRED_HINTS[variable] ?? 'set it';
    problems.push({ variable, message: `${variable}: is required by ${who}; ${hint}` });
  }
  if (parsed.success && parsed.data.STOWAGE_STORAGE.kind !== 's3') {
    for (const variable of ['STOWAGE_S3_ENDPOINT', 'STOWAGE_S3_REGION', 'STOWAGE_S3_FORCE_PATH_STYLE'] as const) {
      if (parsed.data[variable] !== undefined) {
        problems.push({
          variable,
          message: `${variable}: is only used with STOWAGE_STORAGE=s3://bucket/prefix; unset it or use S3 storage`,
        });
      }
    }
  }
  if (parsed.success && parsed.data.REDIS_URL !== undefined && parsed.data.STOWAGE_REDIS_CLUSTER_NODES !== undefined) {
    problems.push({
      variable: 'STOWAGE_REDIS_CLUSTER_NODES',
      message: 'STOWAGE_REDIS_CLUSTER_NODES: names the Redis Cluster, and so does REDIS_URL; set only one of them',
    });
  }
  if (!parsed.success || problems.length > 0) return { ok: false, problems };
  const e = parsed.data;
  const storage: StorageLocation =
    e.STOWAGE_STORAGE.kind === 's3'
      ? {
          ...e.STOWAGE_STORAGE,
          ...(e.STOWAGE_S3_ENDPOINT ? { endpoint: e.STOWAGE_S3_ENDPOINT } : {}),
          ...(e.STOWAGE_S3_REGION ? { region: e.STOWAGE_S3_REGION } : {}),
          // S3-compatible servers (MinIO, Ceph) want path-style URLs; AWS wants virtual-hosted ones.
          forcePathStyle: e.STOWAGE_S3_FORCE_PATH_STYLE ? e.STOWAGE_S3_FORCE_PATH_STYLE === 'true' : e.STOWAGE_S3_ENDPOINT !== undefined,
        }
      : e.STOWAGE_STORAGE;
  const config: StowageConfig = {
    redis: {
      // One URL either way: the connection factory (@stowage/queue) reads the cluster form.
      url: e.STOWAGE_REDIS_CLUSTER_NODES ? `redis+cluster://${e.STOWAGE_REDIS_CLUSTER_NODES.trim()}` : e.REDIS_URL,
      queuePrefix: e.STOWAGE_QUEUE_PREFIX,
    },
    kube: { kubeconfig: e.KUBECONFIG, namespace: e.STOWAGE_NAMESPACE },
    storage,
    api: {
      port: e.PORT ?? options.defaultPort ?? 8080,
      host: e.HOST,
      auth: e.STOWAGE_AUTH,
      tokens: e.STOWAGE_API_TOKENS,
      kubeTokens: e.STOWAGE_KUBE_AUTH === 'enabled',
      controller: e.STOWAGE_CONTROLLER === 'enabled',
    },
    concurrency: { block: e.STOWAGE_BLOCK_CONCURRENCY, watch: e.STOWAGE_WATCH_CONCURRENCY, hook: e.STOWAGE_HOOK_CONCURRENCY },
    jobLocks: {
      ...(e.STOWAGE_LOCK_DURATION_MS !== undefined ? { durationMs: e.STOWAGE_LOCK_DURATION_MS } : {}),
      ...(e.STOWAGE_STALLED_INTERVAL_MS !== undefined ? { stalledIntervalMs: e.STOWAGE_STALLED_INTERVAL_MS } : {}),
    },
    pipeline: {
      blocksInFlightPerBackup: e.STOWAGE_BLOCKS_IN_FLIGHT_PER_BACKUP,
      namespaceListsMax: e.STOWAGE_PLAN_NAMESPACE_LISTS_MAX,
    },
    restore: {
      itemsConcurrency: e.STOWAGE_RESTORE_ITEMS_CONCURRENCY,
      maxInFlight: e.STOWAGE_RESTORE_MAX_INFLIGHT,
      waitImage: e.STOWAGE_RESTORE_WAIT_IMAGE,
      planHeapMb: e.STOWAGE_RESTORE_PLAN_HEAP_MB,
    },
    worker: { queues: e.STOWAGE_WORKER_QUEUES },
    node: { name: e.STOWAGE_NODE_NAME },
    repository: { key: e.STOWAGE_REPO_KEY, pruneGraceMs: e.STOWAGE_PRUNE_GRACE, dir: e.STOWAGE_REPOSITORY_DIR },
    log: { level: e.LOG_LEVEL },
    shutdown: { timeoutMs: e.STOWAGE_SHUTDOWN_TIMEOUT_MS },
    backupSync: { intervalMs: e.STOWAGE_BACKUP_SYNC_INTERVAL_MS },
    streams: { perCaller: e.STOWAGE_SSE_MAX_PER_TOKEN, total: e.STOWAGE_SSE_MAX_STREAMS },
    writeRateLimit: { max: e.STOWAGE_WRITE_RATE_LIMIT, windowMs: e.STOWAGE_WRITE_RATE_WINDOW },
    specLimits: {
      namespaces: e.STOWAGE_SPEC_MAX_NAMESPACES,
      resources: e.STOWAGE_SPEC_MAX_RESOURCES,
      hooks: e.STOWAGE_SPEC_MAX_HOOKS,
      maxHookTimeoutMs: e.STOWAGE_MAX_HOOK_TIMEOUT,
    },
  };
  return { ok: true, config: deepFreeze(config) };
}

/** One line per problem, for a terminal. */
export function formatConfigProblems(problems: readonly ConfigProblem[]): string {
  return [`Stowage configuration has ${problems.length} problem(s):`, ...problems.map((p) => `  - ${p.message}`)].join('\n');
}

export interface LoadConfigOrExitOptions extends LoadConfigOptions {
  /** Where problems are printed; default stderr. */
  write?: (text: string) => void;
  /** Default process.exit. */
  exit?: (code: number) => never;
}

/** For main.ts: the config, or every problem printed and exit 1. */
export function loadConfigOrExit(env: Readonly<Record<string, string | undefined>>, options: LoadConfigOrExitOptions = {}): StowageConfig {
  const result = loadConfig(env, options);
  if (result.ok) return result.config;
  const write = options.write ?? ((text: string) => process.stderr.write(text));
  write(`${formatConfigProblems(result.problems)}\n`);
  return (options.exit ?? ((code: number) => process.exit(code)))(1);
}
