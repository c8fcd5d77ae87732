import { useTestRedis } from '@stowage/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, type Harness, startHarness } from './api-harness.js';

let redis: { url: string; stop: () => Promise<void> };
let h: Harness;

beforeAll(async () => {
  redis = await useTestRedis();
  // Logging every one of 10,000 requests would dominate the run; rejections are still classified.
  h = await startHarness(redis.url, { logLevel: 'warn' });
});
afterAll(async () => {
  await h?.close();
  await redis?.stop();
});

const postRaw = (payload: string, contentType = 'application/json') =>
  h.app.inject({ method: 'POST', url: '/v1/backups', headers: { ...auth, 'content-type': contentType }, payload });

function expectProblemAt(res: { statusCode: number; json: () => unknown }, path: string | RegExp): void {
  expect(res.statusCode).toBe(400);
  const { error } = res.json() as { error: { code: string; message: string; problems: Array<{ path: string; message: string }> } };
  expect(error.code).toBe('API_VALIDATION');
  const hit = error.problems.find((p) => (typeof path === 'string' ? p.path === path : path.test(p.path)));
  expect(hit, `a problem at ${path} in ${JSON.stringify(error.problems)}`).toBeDefined();
  expect(hit!.message.length).toBeGreaterThan(5);
  expect(error.message).toContain(hit!.path);
}

describe('hostile input to POST /v1/backups', () => {
  it('malformed JSON → 400 API_BAD_JSON', async () => {
    for (const body of ['{', '{"spec": }', "{'spec': {}}", '{"spec": {}} trailing', '\u0000']) {
      const res = await postRaw(body);
      expect(res.statusCode, body).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'API_BAD_JSON', message: expect.stringContaining('not valid JSON') });
    }
  });

  it('prototype-poisoning JSON → 400, never reaches a handler', async () => {
    const res = await postRaw('{"spec": {}, "__proto__": {"admin": true}}');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('API_BAD_JSON');
  });

  it('wrong content types → 415 naming what is accepted', async () => {
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/xml',
      'image/png',
    ]) {
      const res = await postRaw('{"spec":{}}', type);
      expect(res.statusCode, type).toBe(415);
      expect(res.json().error).toMatchObject({ code: 'API_UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('application/json') });
    }
  });

  it('a 10 MiB body → 413', async () => {
    const body = JSON.stringify({ spec: { includedNamespaces: Array.from({ length: 10 * 1024 }, () => 'n'.repeat(1023)) } });
    expect(body.length).toBeGreaterThan(10 * 1024 * 1024);
    const res = await postRaw(body);
    expect(res.statusCode).toBe(413);
    expect(res.json().error).toMatchObject({ code: 'API_PAYLOAD_TOO_LARGE', message: expect.stringContaining('1 MiB') });
  });

  it('names with "/", "..", 300 characters, upper case or spaces → 400 at "name"', async () => {
    for (const name of ['a/b', '..', '../etc', 'x'.repeat(300), 'Nightly', 'has space', '-lead', 'trail-', '', 'a\u0000b']) {
      const res = await postRaw(JSON.stringify({ name, spec: {} }));
      expectProblemAt(res, 'name');
    }
    const notString = await postRaw(JSON.stringify({ name: 42, spec: {} }));
    expectProblemAt(notString, 'name');
  });

  it('label selectors with broken syntax → 400 naming the selector field', async () => {
    const cases: Array<[unknown, RegExp]> = [
      ['app=web,,tier', /^spec\.labelSelector/],
      [{ matchLabels: { 'bad key!': 'web' } }, /^spec\.labelSelector\.matchLabels/],
      [{ matchLabels: { app: 'has space' } }, /^spec\.labelSelector\.matchLabels/],
      [{ matchExpressions: [{ key: 'app', operator: 'Like', values: ['x'] }] }, /^spec\.labelSelector\.matchExpressions\[0\]/],
      [{ matchExpressions: [{ key: 'app', operator: 'In', values: [] }] }, /^spec\.labelSelector\.matchExpressions\[0\]/],
      [{ matchExpressions: [{ key: 'app', operator: 'Exists', values: ['x'] }] }, /^spec\.labelSelector\.matchExpressions\[0\]/],
    ];
    for (const [labelSelector, path] of cases) {
      const res = await postRaw(JSON.stringify({ spec: { labelSelector } }));
      expectProblemAt(res, path);
    }
  });

  it('hook commands that are not arrays → 400 at the command path', async () => {
    for (const command of ['pg_dump -U postgres', 42, { argv: ['x'] }, [], [1, 2], null]) {
      const body = { spec: { hooks: { resources: [{ name: 'db', pre: [{ exec: { container: 'db', command } }] }] } } };
      const res = await postRaw(JSON.stringify(body));
      expectProblemAt(res, /^spec\.hooks\.resources\[0\]\.pre\[0\]\.exec\.command/);
    }
  });

  it('deeply nested JSON → a 4xx, not a crash', async () => {
    const depth = 100_000;
    const deep = `${'['.repeat(depth)}${']'.repeat(depth)}`;
    for (const body of [`{"spec": {"includedNamespaces": ${deep}}}`, `{"spec": ${deep}}`, `{"spec": {"resourcePolicy": ${deep}}}`]) {
      const res = await postRaw(body);
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
    }
  });

  it('≥ 10,000 generated bodies get only 2xx/4xx, each 4xx a catalogued error', async () => {
    const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/);
    const anyJson = fc.jsonValue({ maxDepth: 2 });
    const selector = fc.oneof(
      anyJson,
      fc.record(
        {
          matchLabels: fc.dictionary(fc.oneof(label, fc.string()), fc.oneof(label, fc.string(), anyJson), { maxKeys: 3 }),
          matchExpressions: fc.array(
            fc.record(
              {
                key: fc.oneof(label, fc.string()),
                operator: fc.constantFrom('In', 'NotIn', 'Exists', 'DoesNotExist', 'Like', ''),
                values: fc.array(fc.string(), { maxLength: 3 }),
              },
              { requiredKeys: [] },
            ),
            { maxLength: 3 },
          ),
        },
        { requiredKeys: [] },
      ),
    );
    const exec = fc.record(
      {
        container: fc.oneof(label, anyJson),
        command: fc.oneof(fc.array(fc.string(), { maxLength: 4 }), anyJson),
        onError: fc.constantFrom('Continue', 'Fail', 'Ignore', 1),
        timeout: fc.oneof(fc.constantFrom('30s', '1m', '5h', '-1s', 'soon', '10'), anyJson),
      },
      { requiredKeys: [] },
    );
    const spec = fc.record(
      {
        includedNamespaces: fc.oneof(fc.array(fc.oneof(label, fc.constant('*'), fc.string()), { maxLength: 3 }), anyJson),
        excludedNamespaces: fc.array(fc.oneof(label, fc.string()), { maxLength: 3 }),
        includedResources: fc.oneof(
          fc.array(fc.constantFrom('pods', 'persistentvolumeclaims', '*', 'deployments.apps', '**', ''), { maxLength: 3 }),
          anyJson,
        ),
        includeClusterResources: fc.oneof(fc.boolean(), fc.constant(null), anyJson),
        labelSelector: selector,
        orLabelSelectors: fc.oneof(fc.array(selector, { maxLength: 2 }), anyJson),
        defaultVolumesToFsBackup: fc.oneof(fc.boolean(), anyJson),
        fsBackupTimeout: fc.oneof(fc.constantFrom('4h', '30m', '1h30m', '0s', 'forever', ''), anyJson),
        ttl: fc.oneof(fc.constantFrom('720h', '24h', 'x'), anyJson),
        storageLocation: fc.oneof(label, anyJson),
        hooks: fc.oneof(
          anyJson,
          fc.record({
            resources: fc.array(
              fc.record(
                {
                  name: fc.oneof(label, anyJson),
                  includedNamespaces: fc.array(label, { maxLength: 2 }),
                  labelSelector: selector,
                  pre: fc.array(fc.record({ exec }, { requiredKeys: [] }), { maxLength: 2 }),
                  post: fc.oneof(fc.array(fc.record({ exec }), { maxLength: 2 }), anyJson),
                },
                { requiredKeys: [] },
              ),
              { maxLength: 2 },
            ),
          }),
        ),
        resourcePolicy: fc.oneof(anyJson, fc.record({ kind: fc.constantFrom('Inline', 'ConfigMap'), name: label }, { requiredKeys: [] })),
        unknownField: anyJson,
      },
      { requiredKeys: [] },
    );
    // Bodies built only from valid parts (name absent or unique-ish), so the accepting path runs too.
    const validSpec = fc.record(
      {
        includedNamespaces: fc.array(label, { maxLength: 3 }),
        includeClusterResources: fc.boolean(),
        labelSelector: fc.record({ matchLabels: fc.dictionary(label, label, { maxKeys: 2 }) }),
        defaultVolumesToFsBackup: fc.boolean(),
        fsBackupTimeout: fc.constantFrom('4h', '30m', '1h30m'),
        hooks: fc.record({
          resources: fc.array(
            fc.record({
              name: label,
              pre: fc.array(
                fc.record({ exec: fc.record({ command: fc.array(fc.string({ minLength: 1 }), { minLength: 1, maxLength: 3 }) }) }),
                { maxLength: 2 },
              ),
            }),
            { maxLength: 2 },
          ),
        }),
      },
      { requiredKeys: [] },
    );
    const validBody = fc.record({ spec: validSpec, name: fc.option(label, { nil: undefined }) }, { requiredKeys: ['spec'] });
    const body = fc.oneof(
      { weight: 2, arbitrary: validBody },
      {
        weight: 6,
        arbitrary: fc.record({ name: fc.oneof(label, fc.string({ maxLength: 80 }), anyJson), spec }, { requiredKeys: ['spec'] }),
      },
      { weight: 2, arbitrary: anyJson },
      { weight: 1, arbitrary: fc.record({ name: fc.string(), spec: anyJson, extra: anyJson }, { requiredKeys: [] }) },
    );

    const statuses = new Map<number, number>();
    const codes = new Set<string>();
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const res = await postRaw(JSON.stringify(b));
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        if (res.statusCode >= 500) return false;
        if (res.statusCode >= 400) {
          const { error } = res.json() as { error?: { code?: string; message?: string; requestId?: string } };
          if (!error?.code || !error.message || !error.requestId) return false;
          codes.add(error.code);
        }
        return res.statusCode === 201 || res.statusCode === 400 || res.statusCode === 409;
      }),
      { numRuns: 10_000 },
    );
    const total = [...statuses.values()].reduce((a, b) => a + b, 0);
    expect(total).toBe(10_000);
    // The generator reaches both sides of validation, not only rejections.
    expect(statuses.get(400) ?? 0).toBeGreaterThan(1_000);
    expect(statuses.get(201) ?? 0).toBeGreaterThan(10);
    expect([...codes].sort()).toEqual(expect.arrayContaining(['API_VALIDATION']));
    // The service is still up and serving afterwards.
    expect((await h.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
  }, 300_000); // 10,000 injects: ~40 s alone, ~2 min beside the other files on 2 busy cores
});
