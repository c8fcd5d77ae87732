import { describe, expect, it } from 'vitest';
import { resultsFromLogs } from './finalize.processor.js';

describe('resultsFromLogs', () => {
  it('sorts errors and warnings into Velero result sets by namespace', () => {
    const results = resultsFromLogs([
      { at: 1, level: 'error', msg: 'hook failed', namespace: 'shop' },
      { at: 2, level: 'warn', msg: 'discovery of x/v1 failed' },
      { at: 3, level: 'info', msg: 'skipped something' },
      { at: 4, level: 'error', msg: 'pod volume backup failed: boom', namespace: 'shop' },
      { at: 5, level: 'error', msg: 'planning failed' },
    ]);
    expect(results).toEqual({
      errors: { namespaces: { shop: ['hook failed', 'pod volume backup failed: boom'] }, velero: ['planning failed'] },
      warnings: { velero: ['discovery of x/v1 failed'] },
    });
  });
});
