export {
  type BackupEvent,
  type BackupRecord,
  BackupState,
  type BackupStateOptions,
  type BlockStateRecord,
  type HookRunRecord,
  type LogLine,
  type PvbStateRecord,
} from './state/backup-state.js';
