import { beforeAll, describe, expect, it } from 'vitest';

// Its set-up throws, so its two tests never run: they must count as failed, not skipped.
describe('a suite whose beforeAll throws', () => {
  beforeAll(() => {
    throw new Error('set-up failed on purpose');
  });
  it('would pass', () => expect(1).toBe(1));
  it('would also pass', () => expect(2).toBe(2));
});

it('a test outside the broken suite passes', () => expect(true).toBe(true));
it.skip('a test skipped on purpose', () => expect(true).toBe(false));
