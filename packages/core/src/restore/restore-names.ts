import { hashParts } from '../hash.js';
import { DNS1123_LABEL_MAX_LENGTH } from '../names.js';

const PVR_HASH_LENGTH = 16;

/**
 * Deterministic PodVolumeRestore name (contract): `<restore>-<16 hex>`, the hash over restore
 * name, the restored pod's uid and the volume, so a re-run job creates the same PVR (409 = it is
 * already there) and no two volumes of a restore share a name. Always a DNS-1123 label.
 */
export function pvrName(restoreName: string, podUid: string, volumeName: string): string {
  const hash = hashParts('pvr', restoreName, podUid, volumeName).slice(0, PVR_HASH_LENGTH);
  const prefix = restoreName
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .slice(0, DNS1123_LABEL_MAX_LENGTH - PVR_HASH_LENGTH - 1)
    .replace(/^-+|-+$/g, '');
  return prefix.length > 0 ? `${prefix}-${hash}` : `pvr-${hash}`;
}
