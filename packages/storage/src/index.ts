export {
  type BackupStorage,
  type ListPage,
  type ListPageOptions,
  MAX_LIST_PAGE,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
} from './backup-storage.js';
export { StorageError, StorageErrorCode, StorageUnavailableError, type UnavailableReason } from './errors.js';
export { FileSystemStorage } from './file-system-storage.js';
export { type BackupItem, restageItems, stagedItemPaths, stageItems } from './item-segments.js';
export { type AssembleOptions, type AssembleResult, assembleTarball, BACKUP_FORMAT_VERSION } from './items.js';
export { assertPathSegment, assertValidKey, assertValidPrefix, MAX_KEY_BYTES } from './keys.js';
export {
  BACKUPS_ROOT,
  type BackupLayout,
  backupLayout,
  groupResourceOf,
  type ItemRef,
  itemRelativePath,
  itemTarballPath,
  REPOSITORY_ROOT,
  type StowageSidecarLayout,
  stowageSidecarLayout,
} from './layout.js';
export { type ObjectStoreLocation, type OpenCheckedResult, openCheckedObjectStore, openObjectStore } from './open-store.js';
export {
  addStorageCost,
  countStorageRequest,
  currentStorageMeter,
  emptyStorageCost,
  isEmptyStorageCost,
  parseStorageCost,
  processStorageMeter,
  STORAGE_OPERATIONS,
  STORAGE_WORKS,
  type StorageCost,
  StorageMeter,
  type StorageOperation,
  type StorageWork,
  storageCostByWork,
  totalRequests,
} from './request-meter.js';
export { S3Storage, type S3StorageOptions, SHA256_METADATA } from './s3-storage.js';
export {
  type BackupResults,
  type ResultSet,
  readGzipJson,
  readLogsSidecar,
  writeBackupMetadata,
  writeGzipJson,
  writeLogsSidecar,
  writePodVolumeBackupsSidecar,
  writeResourceListSidecar,
  writeResultsSidecar,
} from './sidecars.js';
export { readTar, type TarFile } from './tar-reader.js';
export { paxRecord, TAR_END_OF_ARCHIVE, type TarEntry, type TarOptions, tarEntryBlocks, writeTar } from './tar-writer.js';
export {
  openBackupTarball,
  type ReadTarballOptions,
  readBackupTarball,
  readTarballItems,
  type TarballItem,
  type TarballItemRef,
} from './tarball-reader.js';
