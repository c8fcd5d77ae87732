import { UnrecoverableError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { JobPayloadError } from './errors.js';
import { parseItemBlockJobData, parsePlanJobData, parsePvbWatchJobData } from './payloads.js';

describe('job payload parsing', () => {
  it('accepts a payload and ignores fields a newer producer added', () => {
    expect(parsePlanJobData({ backupName: 'b1', backupUid: 'u1', addedLater: true })).toEqual({ backupName: 'b1', backupUid: 'u1' });
    expect(parseItemBlockJobData({ backupName: 'b1', backupUid: 'u1', blockId: 'blk-1', requestId: 'r1' })).toEqual({
      backupName: 'b1',
      backupUid: 'u1',
      blockId: 'blk-1',
      requestId: 'r1',
    });
  });

  it('reports every problem at once as an unrecoverable QUEUE_BAD_PAYLOAD error', () => {
    let caught: unknown;
    try {
      parsePvbWatchJobData({ backupName: '', blockId: 'blk-1', pvbName: 'p', namespace: 'stowage', deadlineAt: 'soon' });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(JobPayloadError);
    expect(caught).toBeInstanceOf(UnrecoverableError);
    const error = caught as JobPayloadError;
    expect(error.code).toBe('QUEUE_BAD_PAYLOAD');
    expect(error.problems.map((p) => p.split(':')[0])).toEqual(['backupName', 'backupUid', 'deadlineAt']);
    expect(error.message).toMatch(/watch-pvb job data is invalid/);
  });
});
