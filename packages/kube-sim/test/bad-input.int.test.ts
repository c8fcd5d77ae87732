import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../src/index.js';

async function call(sim: Simulator, method: string, path: string, body?: string, contentType = 'application/json') {
  const init: RequestInit = { method, headers: { 'Content-Type': contentType, Authorization: `Bearer ${sim.adminToken}` } };
  if (body !== undefined) init.body = body;
  const res = await fetch(`${sim.url}${path}`, init);
  const text = await res.text();
  let json: { kind?: string; reason?: string; code?: number; details?: { causes?: { field?: string }[] } } | undefined;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

describe('bad input gets what a real API server gives, and never brings the simulator down', () => {
  let sim: Simulator;
  beforeAll(async () => {
    sim = await startSimulator({ materializeVolumes: 'none' });
  });
  afterAll(async () => {
    await sim?.close();
  });

  it('malformed JSON is a 400 BadRequest Status', async () => {
    const res = await call(sim, 'POST', '/api/v1/namespaces/shop/configmaps', '{"metadata": {"name": ');
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ kind: 'Status', reason: 'BadRequest', code: 400 });
  });

  it('an unknown resource or group is a 404 NotFound Status', async () => {
    for (const path of [
      '/api/v1/namespaces/shop/widgets',
      '/apis/nope.example.com/v1/things',
      '/apis/nope.example.com/v1',
      '/totally/unknown',
    ]) {
      const res = await call(sim, 'GET', path);
      expect(res.status, path).toBe(404);
      expect(res.json?.kind, path).toBe('Status');
    }
    const missing = await call(sim, 'GET', '/api/v1/namespaces/shop/pods/nope');
    expect(missing.json).toMatchObject({ reason: 'NotFound', code: 404, details: { name: 'nope', kind: 'pods' } });
  });

  it('an update with a stale resourceVersion is a 409 Conflict; a duplicate create is 409 AlreadyExists', async () => {
    const created = await call(
      sim,
      'POST',
      '/api/v1/namespaces/shop/configmaps',
      JSON.stringify({ metadata: { name: 'rv' }, data: { a: '1' } }),
    );
    const cm = JSON.parse(created.text) as { metadata: { resourceVersion: string } };
    const first = await call(sim, 'PUT', '/api/v1/namespaces/shop/configmaps/rv', JSON.stringify({ ...cm, data: { a: '2' } }));
    expect(first.status).toBe(200);
    const stale = await call(sim, 'PUT', '/api/v1/namespaces/shop/configmaps/rv', JSON.stringify({ ...cm, data: { a: '3' } }));
    expect(stale.status).toBe(409);
    expect(stale.json?.reason).toBe('Conflict');
    const dup = await call(sim, 'POST', '/api/v1/namespaces/shop/configmaps', JSON.stringify({ metadata: { name: 'rv' } }));
    expect(dup.json).toMatchObject({ reason: 'AlreadyExists', code: 409 });
  });

  it('an invalid custom resource is a 422 Invalid with field causes, and unknown fields are pruned', async () => {
    const base = '/apis/stowage.dev/v1alpha1/namespaces/stowage/podvolumebackups';
    const bad = await call(
      sim,
      'POST',
      base,
      JSON.stringify({ metadata: { name: 'bad' }, spec: { node: '', pod: { namespace: 'a', name: 'b' }, volume: 3 } }),
    );
    expect(bad.status).toBe(422);
    expect(bad.json?.reason).toBe('Invalid');
    expect(bad.json?.details?.causes?.map((c) => c.field).sort()).toEqual([
      'spec.backupStorageLocation',
      'spec.node',
      'spec.pod.uid',
      'spec.volume',
    ]);
    const good = await call(
      sim,
      'POST',
      base,
      JSON.stringify({
        metadata: { name: 'ok' },
        spec: { node: 'n', pod: { namespace: 'a', name: 'b', uid: 'c' }, volume: 'v', backupStorageLocation: 'd', surplus: true },
      }),
    );
    expect(good.status).toBe(201);
    expect((JSON.parse(good.text) as { spec: Record<string, unknown> }).spec.surplus).toBeUndefined();
  });

  it('fieldValidation: Strict refuses an unknown field of a custom resource, Warn prunes it with a Warning header, a bad directive is a 400', async () => {
    const base = '/apis/stowage.dev/v1alpha1/namespaces/stowage/podvolumebackups';
    const body = (name: string) =>
      JSON.stringify({
        metadata: { name },
        spec: { node: 'n', pod: { namespace: 'a', name: 'b', uid: 'c' }, volume: 'v', backupStorageLocation: 'd', surplus: true },
      });
    const strict = await call(sim, 'POST', `${base}?fieldValidation=Strict`, body('strict'));
    expect(strict.status).toBe(400);
    expect(strict.json?.reason).toBe('BadRequest');
    expect(strict.text).toContain('strict decoding error: unknown field \\"spec.surplus\\"');
    expect((await call(sim, 'GET', `${base}/strict`)).status).toBe(404);

    const res = await fetch(`${sim.url}${base}?fieldValidation=Warn`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${sim.adminToken}` },
      body: body('warned'),
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('warning')).toBe('299 - "unknown field \\"spec.surplus\\""');
    expect(((await res.json()) as { spec: Record<string, unknown> }).spec.surplus).toBeUndefined();

    const wrong = await call(sim, 'POST', `${base}?fieldValidation=strict`, body('wrong'));
    expect(wrong.status).toBe(400);
    expect(wrong.text).toContain('fieldValidation must be one of Ignore, Warn, Strict');
  });

  it('wrong methods, media types and names get the matching Status codes', async () => {
    expect((await call(sim, 'POST', '/api/v1/namespaces/shop/pods/cache', '{}')).status).toBe(405);
    expect((await call(sim, 'PATCH', '/api/v1/namespaces/shop/pods/cache', '{}', 'text/plain')).status).toBe(415);
    expect((await call(sim, 'POST', '/api/v1/namespaces/shop/configmaps', JSON.stringify({ metadata: { name: 'Bad_Name' } }))).status).toBe(
      422,
    );
    expect((await call(sim, 'POST', '/api/v1/namespaces/missing/configmaps', JSON.stringify({ metadata: { name: 'x' } }))).status).toBe(
      404,
    );
    expect((await call(sim, 'GET', '/api/v1/pods?labelSelector=a%20in%20(')).status).toBe(400);
    expect((await call(sim, 'GET', '/api/v1/pods?fieldSelector=spec.bogus%3D1')).status).toBe(400);
    expect((await call(sim, 'GET', '/api/v1/pods?limit=2&continue=garbage')).status).toBe(400);
  });

  it('fuzz: random paths, methods, bodies and content types never produce a 5xx and never stop the server', async () => {
    const segment = fc.oneof(
      fc.constantFrom(
        'api',
        'apis',
        'v1',
        'namespaces',
        'shop',
        'pods',
        'cache',
        'status',
        'exec',
        'watch',
        'stowage.dev',
        'v1alpha1',
        'podvolumebackups',
        'nodes',
        '..',
        '%',
        '%2F',
      ),
      fc.string({ maxLength: 8 }).map(encodeURIComponent),
    );
    const path = fc.array(segment, { maxLength: 7 }).map((parts) => `/${parts.join('/')}`);
    const query = fc.constantFrom(
      '',
      '?watch=false',
      '?limit=-1',
      '?labelSelector=%21%21',
      '?fieldSelector=metadata.name',
      '?continue=%00',
      '?resourceVersion=abc&watch=false',
      '?dryRun=All',
    );
    const body = fc.oneof(
      fc.string({ maxLength: 64 }),
      fc.json({ maxDepth: 3 }),
      fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify({ metadata: { name: 'fz' }, spec: v })),
      fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify([{ op: 'add', path: '/metadata/labels', value: v }])),
    );
    const method = fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS');
    const contentType = fc.constantFrom(
      'application/json',
      'application/merge-patch+json',
      'application/json-patch+json',
      'application/strategic-merge-patch+json',
      'application/apply-patch+yaml',
      'text/plain',
    );
    await fc.assert(
      fc.asyncProperty(method, path, query, body, contentType, async (m, p, q, b, ct) => {
        const res = await call(sim, m, `${p}${q}`, m === 'GET' || m === 'OPTIONS' ? undefined : b, ct);
        expect(res.status, `${m} ${p}${q} ${b}`).toBeLessThan(500);
      }),
      { numRuns: 300 },
    );
    const health = await call(sim, 'GET', '/api/v1/namespaces/shop/pods/cache');
    expect(health.status).toBe(200);
  });
});
