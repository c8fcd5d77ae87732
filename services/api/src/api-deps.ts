/*
 * What the API is built from (`buildApp(deps)`): the stores, queues and controls it serves, and its
 * tunables. Its own module so the route plugins take their part of it without importing the app.
 */

import type { ResourceOfKind, SpecLimits } from '@stowage/core';
import type {
  BackupState,
  CancelBackupResult,
  CancelRestoreResult,
  PruneStatusStore,
  RequestDeletionResult,
  RestoreState,
  ScheduleControl,
  ScheduleStore,
  SubmitBackupInput,
  SubmitBackupResult,
  SubmitRestoreInput,
  SubmitRestoreResult,
} from '@stowage/pipeline';
import type { RedisClient } from '@stowage/queue';
import type { BackupStorage, ObjectStore } from '@stowage/storage';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { AuthMode } from './auth.js';
import type { DryRunPlanner } from './dry-run.js';
import type { StreamCaps } from './stream-slots.js';
import type { WriteRateLimit } from './write-rate-limit.js';

/** Submitting and cancelling backups: the pipeline's job (records the backup, adds `finalize ← plan`). */
export interface BackupControl {
  submit(input: SubmitBackupInput): Promise<SubmitBackupResult>;
  /** Asks a running backup to stop: no new block starts, PVBs get spec.cancel, the phase ends Canceled. */
  cancel(name: string): Promise<CancelBackupResult>;
  /** Deletes a backup (its data, PVBs and record) through a durable job; a running one is canceled first. */
  delete(name: string): Promise<RequestDeletionResult>;
}

export interface ApiDeps {
  /** The process's root pino logger (its redact settings apply; the API never logs headers). */
  logger: Logger;
  /** Producer connection (fail fast: `enableOfflineQueue: false`). SSE streams duplicate it. */
  redis: RedisClient;
  state: BackupState;
  /** Every Stowage queue (backups, item-blocks, pvb-watch, hooks): dashboard, metrics and DELETE. */
  queues: readonly Queue[];
  control: BackupControl;
  /** Schedules (`/v1/schedules`); absent in apps built without them (some tests). */
  schedules?: ScheduleRoutesDeps['schedules'];
  /** Backup storage: finished backups are read from it (the tarball streamed for download); DELETE removes `backups/<name>/`. */
  storage: Pick<ObjectStore, 'deletePrefix' | 'getObject' | 'getStream'>;
  auth: AuthMode;
  /** Extra readiness (e.g. the hosted workers are running); /readyz also checks Redis and closing. */
  isReady?: () => boolean;
  /** Random suffix for generated names (tests may fix it). */
  randomSuffix?: () => string;
  /** SSE heartbeat (comment line) interval; default 15 s. */
  heartbeatMs?: number;
  /** The process's metrics registry (createProcessMetrics): the pipeline's counters are in it; a fresh one by default. */
  metricsRegistry?: Registry | undefined;
  /** Largest accepted request body; default 1 MiB. */
  bodyLimitBytes?: number;
  /** bull-board action buttons (retry, clean, ...) answer 405 when true. Default false. */
  dashboardReadOnly?: boolean;
  /** Lifetime of the console's session cookie (POST /v1/session); default 8 h. */
  sessionTtlMs?: number;
  /** Clock for session cookies (tests). */
  now?: () => number;
  /** POST /v1/backups?dryRun=true: plans without running (needs a Kubernetes client); absent: 503. */
  dryRun?: DryRunPlanner;
  /** The last repository prune (`stowage_repository_prune_*` metrics); absent: no such metrics. */
  prune?: PruneStatusStore | undefined;
  /**
   * The repository's prune grace (STOWAGE_PRUNE_GRACE): a backup or schedule template whose
   * fsBackupTimeout is not shorter is refused (core's fsBackupTimeoutProblem). Absent: not checked.
   */
  pruneGraceMs?: number;
  /** Open event streams (SSE) per caller and in all; past either a 429 with Retry-After. Default 20 and 500. */
  streamCaps?: StreamCaps;
  /** Write requests (POST, PUT, PATCH, DELETE) per caller per window; past it a 429 with Retry-After. Absent or max 0: none. */
  writeRateLimit?: WriteRateLimit;
  /** Bounds on every list and size of a backup, restore or schedule request (core's DEFAULT_SPEC_LIMITS when absent). */
  specLimits?: SpecLimits;
  /** The restore API (`/v1/restores…`); absent: no restore routes. */
  restores?: Omit<RestoreRoutesDeps, 'queues' | 'storage' | 'randomSuffix'> | undefined;
}

export const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;

/** Submitting and cancelling restores: the pipeline's job (records the restore, adds `restore-finalize ← restore-plan`). */
export interface RestoreControl {
  submit(input: SubmitRestoreInput): Promise<SubmitRestoreResult>;
  cancel(name: string): Promise<CancelRestoreResult>;
}

export interface RestoreRoutesDeps {
  specLimits?: SpecLimits;
  restores: RestoreState;
  control: RestoreControl;
  /** The phase (and namespace) of a backup, or undefined when there is no such backup (in flight or in storage). */
  backupPhase(name: string): Promise<{ phase: string; namespace?: string | undefined } | undefined>;
  /** Backup storage: a finished restore's archive is read from it (when Redis lost it); DELETE removes `restores/<name>/`. */
  storage: Pick<BackupStorage, 'deletePrefix' | 'getObject'>;
  queues: readonly Queue[];
  randomSuffix?: () => string;
  /**
   * The cluster's `<apiVersion>/<Kind>` → group and resource (discovery): a Kubernetes user's
   * namespaceMapping is checked per restored kind with it. Absent: such a restore is refused.
   */
  resourceOfKind?: () => Promise<ResourceOfKind>;
}

export interface ScheduleRoutesDeps {
  specLimits?: SpecLimits;
  schedules: { control: ScheduleControl; store: ScheduleStore };
  /** A template whose fsBackupTimeout is not shorter than the prune grace is refused (as a backup's spec is). */
  pruneGraceMs?: number;
  /** Submits a backup (a schedule run now: `POST /v1/schedules/:name/backups`). */
  backups: Pick<BackupControl, 'submit'>;
  now?: () => number;
}
