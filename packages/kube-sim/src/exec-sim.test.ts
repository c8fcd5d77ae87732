import { describe, expect, it } from 'vitest';
import { checkPodExecBehaviour, resolveExecOutcome } from './exec-sim.js';

describe('exec rules with times', () => {
  it('a rule with times answers its first N matching execs per container, then the next rule or the default does', () => {
    const behaviour = { rules: [{ command: ['/bin/hook'], exitCode: 1, times: 2 }], default: { exitCode: 0, stdout: 'ok' } };
    const uses = new Map<string, number>();
    const run = (key: string) => resolveExecOutcome(behaviour, ['/bin/hook'], uses, key).exitCode;
    expect([run('ns/a/app'), run('ns/a/app'), run('ns/a/app'), run('ns/a/app')]).toEqual([1, 1, 0, 0]);
    // Counted per container: another pod starts afresh.
    expect(run('ns/b/app')).toBe(1);
    // Other commands do not use the rule up.
    expect(resolveExecOutcome(behaviour, ['/bin/other'], uses, 'ns/c/app').exitCode).toBe(0);
    expect(run('ns/c/app')).toBe(1);
  });

  it('rejects a times that is not a whole number of at least 1', () => {
    const checked = checkPodExecBehaviour({
      '*': {
        rules: [
          { command: ['x'], times: 0 },
          { command: ['y'], times: 1.5 },
        ],
      },
    });
    expect(checked).toEqual({
      ok: false,
      problems: ['*.rules[0].times must be an integer >= 1', '*.rules[1].times must be an integer >= 1'],
    });
  });
});
