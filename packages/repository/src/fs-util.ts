import { open, rename, unlink } from 'node:fs/promises';
import { tmpPath } from './layout.js';

/** Writes a complete file under a temp name in the repository and renames it into place. */
export async function writeFileAtomic(repoDir: string, finalPath: string, data: Uint8Array, durable: boolean): Promise<void> {
  const tmp = tmpPath(repoDir);
  const file = await open(tmp, 'wx', 0o600);
  try {
    await file.writeFile(data);
    if (durable) await file.datasync();
  } catch (error) {
    await file.close().catch(() => {});
    await unlink(tmp).catch(() => {});
    throw error;
  }
  await file.close();
  try {
    await rename(tmp, finalPath);
  } catch (error) {
    await unlink(tmp).catch(() => {});
    throw error;
  }
}
