import type { BlockWait } from './deps.js';

/**
 * Velero's way since 1.16, kept only for the benchmark's side-by-side (not the product): the
 * item-block job waits for its block's PVBs, holding its worker slot the whole time, then runs the
 * block's post hooks itself. `pnpm bench` wires it into the worker processes of its inline mode
 * (deps.blockWait); the product's item-block job returns once its PVBs are created.
 */
export const inlineBlockWait: BlockWait = async ({ pvbNames, pvbEnded, finishBlock }) => {
  for (const name of pvbNames) await pvbEnded(name);
  await finishBlock();
};
