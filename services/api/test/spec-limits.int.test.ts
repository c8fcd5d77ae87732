import { DEFAULT_SPEC_LIMITS } from '@stowage/core';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, type Harness, startHarness } from './api-harness.js';

let redis: { url: string; stop: () => Promise<void> };
let h: Harness;
let raised: Harness;

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url, { logLevel: 'warn' });
  // An operator who needs more namespaces and fewer minutes of hook (STOWAGE_SPEC_MAX_NAMESPACES, STOWAGE_MAX_HOOK_TIMEOUT).
  raised = await startHarness(redis.url, {
    logLevel: 'warn',
    overrides: { specLimits: { ...DEFAULT_SPEC_LIMITS, namespaces: 5_000, maxHookTimeoutMs: 60_000 } },
  });
});
afterAll(async () => {
  await h?.close();
  await raised?.close();
  await redis?.stop();
});

const names = (n: number) => Array.from({ length: n }, (_, i) => `ns-${i}`);
const post = (app: Harness, url: string, payload: unknown) =>
  app.app.inject({ method: 'POST', url, headers: auth, payload: payload as object });
const timeoutHook = (timeout: string) => ({ hooks: { resources: [{ name: 'db', pre: [{ exec: { command: ['/bin/true'], timeout } }] }] } });

function expectOverLimit(res: { statusCode: number; json: () => unknown }, path: string, limit: string, value: string): void {
  expect(res.statusCode).toBe(400);
  const { error } = res.json() as { error: { code: string; message: string; problems: Array<{ path: string; message: string }> } };
  expect(error.code).toBe('API_VALIDATION');
  expect(error.problems).toEqual([{ path, message: expect.stringContaining(`limit: ${limit}`) }]);
  expect(error.problems[0]?.message).toContain(value);
  expect(error.message).toContain(path);
}

describe('spec limits on the write routes', () => {
  it('a backup naming more namespaces than the limit is a 400 naming the field and the limit; at the limit it is accepted', async () => {
    const n = DEFAULT_SPEC_LIMITS.namespaces;
    expectOverLimit(
      await post(h, '/v1/backups', { name: 'too-many', spec: { includedNamespaces: names(n + 1) } }),
      'spec.includedNamespaces',
      'namespaces',
      String(n),
    );
    expect(await h.state.getBackup('too-many')).toBeUndefined();
    const res = await post(h, '/v1/backups', { name: 'at-limit', spec: { includedNamespaces: names(n) } });
    expect(res.statusCode).toBe(201);
    expect((await h.state.getBackup('at-limit'))?.phase).toBe('New');
  });

  it('a hook timeout over the maximum (30m by default) is a 400; 30m is accepted', async () => {
    expectOverLimit(
      await post(h, '/v1/backups', { name: 'long-hook', spec: timeoutHook('31m') }),
      'spec.hooks.resources[0].pre[0].exec.timeout',
      'maxHookTimeoutMs',
      '30m',
    );
    expect((await post(h, '/v1/backups', { name: 'hook-30m', spec: timeoutHook('30m') })).statusCode).toBe(201);
  });

  it("a schedule's template is held to the same bounds, in create and in patch", async () => {
    const hooks = Array.from({ length: 11 }, (_, i) => ({
      name: `s${i}`,
      post: Array.from({ length: 50 }, () => ({ exec: { command: ['/bin/true'] } })),
    }));
    expectOverLimit(
      await post(h, '/v1/schedules', {
        name: 'many-hooks',
        spec: { schedule: '@daily', paused: true, template: { hooks: { resources: hooks } } },
      }),
      'spec.template.hooks',
      'hooks',
      String(DEFAULT_SPEC_LIMITS.hooks),
    );
    expect((await post(h, '/v1/schedules', { name: 'nightly', spec: { schedule: '@daily', paused: true, template: {} } })).statusCode).toBe(
      201,
    );
    const patch = await h.app.inject({
      method: 'PATCH',
      url: '/v1/schedules/nightly',
      headers: auth,
      payload: { spec: { template: { excludedNamespaces: names(DEFAULT_SPEC_LIMITS.namespaces + 1) } } },
    });
    expectOverLimit(patch, 'spec.template.excludedNamespaces', 'namespaces', String(DEFAULT_SPEC_LIMITS.namespaces));
  });

  it("the operator's limits apply: more namespaces are accepted, a shorter hook maximum is enforced", async () => {
    const res = await post(raised, '/v1/backups', {
      name: 'raised-ns',
      spec: { includedNamespaces: names(DEFAULT_SPEC_LIMITS.namespaces + 1) },
    });
    expect(res.statusCode).toBe(201);
    expectOverLimit(
      await post(raised, '/v1/backups', { name: 'raised-hook', spec: timeoutHook('2m') }),
      'spec.hooks.resources[0].pre[0].exec.timeout',
      'maxHookTimeoutMs',
      '1m',
    );
  });
});
