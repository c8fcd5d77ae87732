/*
 * Runs the resource controllers in the api (docs/tenancy.md#the-controller): one replica at a time
 * (the Lease), a full level-triggered pass every `intervalMs` while leading. A pass that fails (the
 * API server away, the CRDs not installed) is logged and the next one tries again.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { AccessAttributes, Requester } from '@stowage/core';
import type { AccessDecision, AccessReviewer, KubeClients } from '@stowage/kube';
import type { BackupControl } from '../api-deps.js';
import type { BackupReads } from '../backup-view.js';
import { BackupController } from './backup-controller.js';
import { startLeaderElection } from './lease.js';
import { ResourceWriter } from './resource-writer.js';
import { RestoreController, type RestoreResourcesDeps } from './restore-controller.js';
import { ScheduleController, type ScheduleResourcesDeps } from './schedule-controller.js';

export interface ResourceControllerOptions {
  kube: Pick<KubeClients, 'requestJson'>;
  control: BackupControl;
  reads: BackupReads;
  access: Pick<AccessReviewer, 'review'>;
  /** Restore and ClusterRestore resources (POST /v1/restores' submission); absent: not reconciled. */
  restores?: RestoreResourcesDeps | undefined;
  /** Schedule and ClusterSchedule resources (ScheduleControl, as /v1/schedules); absent: not reconciled. */
  schedules?: ScheduleResourcesDeps | undefined;
  logger: { warn(obj: object, msg?: string): void; info(obj: object, msg?: string): void };
  /** Stowage's namespace: the Lease, and the Events of cluster-scoped resources. */
  namespace: string;
  /** Between passes; default 2 s. */
  intervalMs?: number;
  /** The Lease's duration; default 15 s (a killed leader's successor takes over within it). */
  leaseDurationMs?: number;
  identity?: string;
}

export interface ResourceController {
  isLeader(): boolean;
  stop(): Promise<void>;
}

export const CONTROLLER_LEASE = 'stowage-controller';

export function startResourceController(opts: ResourceControllerOptions): ResourceController {
  const identity = opts.identity ?? `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`;
  const everyMs = opts.intervalMs ?? 2_000;
  const election = startLeaderElection({
    kube: opts.kube,
    namespace: opts.namespace,
    name: CONTROLLER_LEASE,
    identity,
    retryEveryMs: Math.min(everyMs, 2_000),
    ...(opts.leaseDurationMs !== undefined ? { leaseDurationMs: opts.leaseDurationMs } : {}),
    onError: (err) => opts.logger.warn({ err }, 'controller Lease: cannot read or write it'),
  });
  const writer = new ResourceWriter({ kube: opts.kube, logger: opts.logger, eventNamespace: opts.namespace });
  const backups = new BackupController({ ...opts, eventNamespace: opts.namespace, writer });
  // Stowage's own requesters (cluster resources) may do anything; a namespaced resource's account is asked.
  const decide = (requester: Requester, attrs: AccessAttributes): Promise<AccessDecision> =>
    requester.kind === 'stowage' ? Promise.resolve({ allowed: true }) : opts.access.review(requester, attrs);
  const controllers: Array<{ reconcileAll(): Promise<void> }> = [backups];
  if (opts.restores) controllers.push(new RestoreController({ ...opts.restores, kube: opts.kube, writer, decide, logger: opts.logger }));
  if (opts.schedules) controllers.push(new ScheduleController({ ...opts.schedules, kube: opts.kube, writer, decide, logger: opts.logger }));
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const pass = async () => {
    if (election.isLeader()) {
      for (const controller of controllers) {
        try {
          await controller.reconcileAll();
        } catch (err) {
          opts.logger.warn({ err }, 'controller pass failed; trying again');
        }
      }
    }
    if (!stopped) timer = setTimeout(() => (running = pass()), everyMs);
  };
  timer = setTimeout(() => (running = pass()), 0);
  return {
    isLeader: () => election.isLeader(),
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
      await election.stop();
    },
  };
}
