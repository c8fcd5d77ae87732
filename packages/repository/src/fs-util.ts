import { open, rename, unlink } from 'node:fs/promises';

/** Writes a complete file under the temp name `tmp` and renames it to `finalPath`. */
export async function writeFileAtomic(tmp: string, finalPath: string, data: Uint8Array, durable: boolean): Promise<void> {
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
