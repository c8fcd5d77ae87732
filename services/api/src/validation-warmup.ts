/*
 * The request validators, run once before the api listens on a backup request near its bounds.
 * V8 runs new code slowly until it has seen it hot: the first large spec a fresh api validated held
 * its event loop for ~0.4 s of CPU (over a second on a loaded node), every later one a fifth of
 * that (issue #45). Paid here, at start, before /readyz answers, no request waits behind it.
 */
import { DEFAULT_SPEC_LIMITS, specLimitProblems, validateBackupRequest } from '@stowage/core';

const names = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

/** Validates a generated request at the list bounds (twice, so the hot paths are optimized); returns the ms it took. */
export function warmRequestValidation(): number {
  const started = performance.now();
  const limits = DEFAULT_SPEC_LIMITS;
  const hook = { exec: { command: ['/bin/true'], onError: 'Continue', timeout: '30s' } };
  const request = {
    name: 'warm-up',
    spec: {
      includedNamespaces: names('included', limits.namespaces),
      excludedNamespaces: names('excluded', limits.namespaces),
      includedResources: names('things', limits.resources).map((r) => `${r}.example.com`),
      orLabelSelectors: [{ matchLabels: { app: 'web' } }, { matchExpressions: [{ key: 'tier', operator: 'In', values: ['a', 'b'] }] }],
      hooks: {
        resources: Array.from({ length: 20 }, (_, i) => ({
          name: `set-${i}`,
          includedNamespaces: names(`hook-${i}`, limits.namespaces),
          labelSelector: { matchLabels: { app: 'web' } },
          pre: [hook],
          post: [hook],
        })),
        backup: { pre: [{ name: 'pause', namespace: 'ops', command: ['/bin/true'], timeout: '30s' }] },
      },
    },
  };
  for (let round = 0; round < 2; round++) {
    specLimitProblems('backup', request);
    const validation = validateBackupRequest(request);
    if (!validation.ok) throw new Error(`the warm-up request is invalid: ${JSON.stringify(validation.problems.slice(0, 3))}`);
  }
  return performance.now() - started;
}
