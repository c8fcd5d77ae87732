export * from './backup-estimate.js';
export * from './backup-hooks.js';
export * from './backup-spec.js';
export * from './backup-spec.schema.js';
export * from './backup-vs-prune-grace.js';
export * from './dispatch-order.js';
export * from './dry-run-plan.js';
export * from './duration.js';
export * from './errors.js';
export * from './format-bytes.js';
export * from './fs-backup-volumes.js';
export * from './glob.js';
export * from './hash.js';
export * from './hooks.js';
export * from './item-blocks.js';
export * from './kube-types.js';
export * from './label-selector.js';
export * from './names.js';
export * from './phases.js';
export * from './quantity.js';
export * from './related-items.js';
export * from './resource-policy.schema.js';
export * from './resource-selection.js';
export * from './restore/index.js';
export * from './schedule.schema.js';
export * from './snapshot-class.js';
export * from './spec-limits.js';
export {
  formatPath,
  type HookSetScope,
  labelSelectorInput,
  requestNameSchema,
  type SpecSelection,
  type ValidationProblem,
} from './spec-validation.js';
export * from './spec-view.js';
export * from './tenancy.js';
export * from './volume-policy.js';
