/*
 * Restore's pure rules (docs/architecture.md#the-restore-job-graph, issue #18): spec validation, item selection, the creation
 * order, per-kind transforms, hooks, existing-resource decisions and the round-trip diff.
 * A restore plan reads: validateRestoreRequest → selectRestoreItems → restoreTiers →
 * transformForRestore per item → (409) decideExistingResource; restored pods' exec hooks come
 * from resolveRestoreHooks; tests compare with restoreDiff.
 */
export * from './existing-resource.js';
export { createMergePatch, jsonEqual } from './json.js';
export * from './restore-diff.js';
export * from './restore-hooks.js';
export * from './restore-order.js';
export * from './restore-selection.js';
export * from './restore-spec.schema.js';
export * from './restore-transforms.js';
export * from './types.js';
