import type { PvrClient } from '@stowage/kube';
import type { PipelineDeps } from '../deps.js';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import type { RestoreState } from './restore-state.js';

/** The restore deps a restore processor needs; a process hosting restore queues must pass them. */
export function restoreDepsOf(deps: PipelineDeps): { restores: RestoreState; pvrs: PvrClient } {
  if (!deps.restores || !deps.pvrs) {
    throw new UnrecoverablePipelineError(
      PipelineErrorCode.badArgument,
      'this process hosts restore jobs but its PipelineDeps have no `restores` state or `pvrs` client',
    );
  }
  return { restores: deps.restores, pvrs: deps.pvrs };
}
