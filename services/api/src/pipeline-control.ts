import { type BackupState, cancelBackup, requestBackupDeletion, submitBackup } from '@stowage/pipeline';
import type { FlowProducer, Queue } from 'bullmq';
import type { BackupControl } from './api-deps.js';

export interface PipelineControlDeps {
  state: BackupState;
  /** Kept open by the API for the life of the process. */
  flowProducer: FlowProducer;
  queuePrefix: string;
  /** The hooks queue: a cancel (or the deletion of a running backup) wakes the backup's parked post-hooks jobs through it. */
  hooksQueue?: Queue | undefined;
  now?: () => number;
  /** How long DELETE waits for an ended backup's deletion job before answering 202; default 15 s. */
  deleteWaitMs?: number;
}

/** The API's BackupControl: pipeline's submitBackup (record + `finalize ← plan`) and cancelBackup. */
export function createPipelineControl(deps: PipelineControlDeps): BackupControl {
  const submitDeps = {
    state: deps.state,
    flowProducer: deps.flowProducer,
    queuePrefix: deps.queuePrefix,
    ...(deps.now ? { now: deps.now } : {}),
  };
  return {
    submit: (input) => submitBackup(submitDeps, input),
    cancel: (name) => cancelBackup({ state: deps.state, hooksQueue: deps.hooksQueue }, name),
    delete: (name) =>
      requestBackupDeletion(
        {
          state: deps.state,
          flowProducer: deps.flowProducer,
          hooksQueue: deps.hooksQueue,
          ...(deps.deleteWaitMs !== undefined ? { waitMs: deps.deleteWaitMs } : {}),
        },
        name,
      ),
  };
}
