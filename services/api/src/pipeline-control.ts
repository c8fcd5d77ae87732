import { randomUUID } from 'node:crypto';
import type { BackupState } from '@stowage/pipeline';
import { addBackupFlow } from '@stowage/queue';
import type { FlowProducer } from 'bullmq';
import type { BackupControl } from './app.js';

export interface PipelineControlDeps {
  state: BackupState;
  flowProducer: FlowProducer;
  now?: () => number;
}

/**
 * Submits and cancels backups. Records the backup (phase New) and adds the flow `finalize ← plan`
 * with deterministic job ids and the request id in the job data.
 * TODO(pipeline): delegate to pipeline's submitBackup/cancelBackup once they are exported.
 */
export function createPipelineControl(deps: PipelineControlDeps): BackupControl {
  const now = deps.now ?? Date.now;
  return {
    async submit({ name, spec, requestId }) {
      const record = { name, uid: randomUUID(), spec, phase: 'New', requestId, createdAt: now() };
      const { created } = await deps.state.createBackup(record);
      if (!created) {
        const existing = await deps.state.getBackup(name);
        return { created: false, record: existing ?? record };
      }
      await addBackupFlow(deps.flowProducer, { backupName: name, backupUid: record.uid, requestId });
      return { created: true, record };
    },
    async cancel(name) {
      await deps.state.updateBackup(name, { cancelRequestedAt: now() });
      await deps.state.appendEvent(name, 'backup.cancel-requested', {});
    },
  };
}
