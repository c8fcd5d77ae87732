import { hashParts } from './hash.js';

/** Longest Kubernetes DNS-1123 label (object names of most kinds, label values). */
export const DNS1123_LABEL_MAX_LENGTH = 63;

const DNS1123_LABEL_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** True when `value` is a DNS-1123 label: 1–63 chars of [a-z0-9-], alphanumeric at both ends. */
export function isDns1123Label(value: string): boolean {
  return value.length <= DNS1123_LABEL_MAX_LENGTH && DNS1123_LABEL_PATTERN.test(value);
}

/**
 * Every reason `value` is not a DNS-1123 label, phrased so a person can fix it; empty when valid.
 */
export function explainDns1123Label(value: string): string[] {
  const problems: string[] = [];
  if (value.length === 0) return ['must not be empty (a DNS-1123 label of 1-63 characters)'];
  if (value.length > DNS1123_LABEL_MAX_LENGTH) {
    problems.push(`is ${value.length} characters long; the limit is ${DNS1123_LABEL_MAX_LENGTH}`);
  }
  if (/[A-Z]/.test(value)) problems.push('must be lowercase');
  const invalid = [...new Set(value.replace(/[a-zA-Z0-9-]/g, ''))];
  if (invalid.length > 0) {
    problems.push(`contains ${invalid.map((c) => JSON.stringify(c)).join(', ')}; only lowercase letters, digits and '-' are allowed`);
  }
  if (!/^[a-zA-Z0-9]/.test(value)) problems.push('must start with a lowercase letter or digit');
  if (!/[a-zA-Z0-9]$/.test(value)) problems.push('must end with a lowercase letter or digit');
  return problems;
}

/** Lowercases and replaces anything outside [a-z0-9-] so the result can be part of a label. */
function toLabelFragment(value: string): string {
  return value.toLowerCase().replace(/[^a-z0-9-]/g, '-');
}

/** Cuts `value` to `maxLength` and drops trailing/leading '-' so it can sit at a label's edge. */
function trimFragment(value: string, maxLength: number): string {
  return value.slice(0, maxLength).replace(/^-+/, '').replace(/-+$/, '');
}

const PVB_HASH_LENGTH = 16;

/**
 * Deterministic PodVolumeBackup name: `<backup prefix>-<16 hex>` where the hash covers backup
 * name, pod uid and volume name, so re-running a block recreates the same PVB (409 = already
 * there) and no two volumes of a backup share a name. Always a DNS-1123 label of ≤ 63 chars.
 */
export function pvbName(backupName: string, podUid: string, volumeName: string): string {
  const hash = hashParts('pvb', backupName, podUid, volumeName).slice(0, PVB_HASH_LENGTH);
  const prefix = trimFragment(toLabelFragment(backupName), DNS1123_LABEL_MAX_LENGTH - PVB_HASH_LENGTH - 1);
  return prefix.length > 0 ? `${prefix}-${hash}` : `pvb-${hash}`;
}

/**
 * Deterministic name of the objects one snapshotted volume of a backup gets — its VolumeSnapshot
 * (in the pod's namespace), and with data movement its DataUpload and the temporary claim and pod
 * that expose the snapshot (in Stowage's namespace): `<backup prefix>-<16 hex>` over backup name,
 * pod uid and volume name, with a kind of its own (`vs`) so it never equals the volume's PVB name.
 */
export function volumeSnapshotName(backupName: string, podUid: string, volumeName: string): string {
  const hash = hashParts('vs', backupName, podUid, volumeName).slice(0, PVB_HASH_LENGTH);
  const prefix = trimFragment(toLabelFragment(backupName), DNS1123_LABEL_MAX_LENGTH - PVB_HASH_LENGTH - 1);
  return prefix.length > 0 ? `${prefix}-${hash}` : `vs-${hash}`;
}

/**
 * Deterministic PodVolumeRestore name: `<restore prefix>-<16 hex>`, the hash over restore name,
 * restored pod uid and volume name (the contract's `<restore>-<short hash of pod uid + volume>`),
 * so a re-run restore-items job recreates the same PVR (409 = already there).
 */
export function pvrName(restoreName: string, podUid: string, volumeName: string): string {
  const hash = hashParts('pvr', restoreName, podUid, volumeName).slice(0, PVB_HASH_LENGTH);
  const prefix = trimFragment(toLabelFragment(restoreName), DNS1123_LABEL_MAX_LENGTH - PVB_HASH_LENGTH - 1);
  return prefix.length > 0 ? `${prefix}-${hash}` : `pvr-${hash}`;
}

/**
 * A backup name from a prefix and a caller-supplied random suffix (core has no randomness):
 * `<prefix>-<suffix>`, the prefix cut so the whole stays ≤ 63 chars.
 */
export function generateBackupName(prefix: string, randomSuffix: string): string {
  const suffix = randomSuffix.toLowerCase().replace(/[^a-z0-9]/g, '');
  if (suffix.length === 0) throw new Error('generateBackupName: randomSuffix must contain letters or digits');
  const cutSuffix = suffix.slice(0, DNS1123_LABEL_MAX_LENGTH - 2);
  const cutPrefix = trimFragment(toLabelFragment(prefix), DNS1123_LABEL_MAX_LENGTH - cutSuffix.length - 1);
  return cutPrefix.length > 0 ? `${cutPrefix}-${cutSuffix}` : `backup-${cutSuffix}`.slice(0, DNS1123_LABEL_MAX_LENGTH);
}

/*
 * BullMQ job ids. Rules (helper guide): never contain ':' (BullMQ key separator) and never all
 * digits (BullMQ treats numeric ids as its own counter ids). Every id below contains '.', so it
 * is never all digits; inputs are checked for ':' because a ':' here is a programming error.
 */
function assertJobIdPart(kind: string, value: string): void {
  if (value.length === 0) throw new Error(`job id: ${kind} must not be empty`);
  if (value.includes(':')) throw new Error(`job id: ${kind} ${JSON.stringify(value)} contains ':'`);
}

function jobId(...parts: readonly [kind: string, value: string][]): string {
  for (const [kind, value] of parts) assertJobIdPart(kind, value);
  return parts.map(([, value]) => value).join('.');
}

/** `<backup>.plan` — the plan job of a backup. */
export function planJobId(backupName: string): string {
  return jobId(['backup name', backupName], ['suffix', 'plan']);
}

/** `<backup>.finalize` — the finalize job (parent of plan and every block's post-hooks job). */
export function finalizeJobId(backupName: string): string {
  return jobId(['backup name', backupName], ['suffix', 'finalize']);
}

/** `<backup>.<blockId>` — the item-block job (block ids start with `blk-`, so never `plan`/`finalize`). */
export function blockJobId(backupName: string, blockId: string): string {
  return jobId(['backup name', backupName], ['block id', blockId]);
}

/** `<backup>.<blockId>.post-hooks` — the block's post-hooks job (parent of item-block and pvb-watch jobs). */
export function postHooksJobId(backupName: string, blockId: string): string {
  return jobId(['backup name', backupName], ['block id', blockId], ['suffix', 'post-hooks']);
}

/**
 * `<backup>.backup-hooks.<phase>` — the job that runs the backup-level hooks of one phase
 * (`pre`, `post`) in a backup worker: a child of plan (pre) or finalize (post).
 */
export function backupHooksJobId(backupName: string, phase: 'pre' | 'post'): string {
  return jobId(['backup name', backupName], ['suffix', 'backup-hooks'], ['phase', phase]);
}

/**
 * Whether `id` has the shape of a post-hooks job id of `backupName` (a cancel wakes those). A
 * backup named `<backupName>.<more>` matches too; waking its jobs only costs them a look.
 */
export function isPostHooksJobIdOf(backupName: string, id: string): boolean {
  return id.startsWith(`${backupName}.`) && id.endsWith('.post-hooks');
}

/** `<backup>.watch.<pvbName>` — the pvb-watch job of one PVB. */
export function pvbWatchJobId(backupName: string, pvbNameValue: string): string {
  return jobId(['backup name', backupName], ['suffix', 'watch'], ['pvb name', pvbNameValue]);
}
