import { afterAll, expect, it } from 'vitest';

// Every test passes, then the file's tear-down throws: the file counts as one failure.
afterAll(() => {
  throw new Error('tear-down failed on purpose');
});
it('passes', () => expect(1).toBe(1));
