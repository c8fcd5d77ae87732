import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, type Harness, startHarness } from './api-harness.js';

let redis: { url: string; stop: () => Promise<void> };
let h: Harness;

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url);
});
afterAll(async () => {
  await h?.close();
  await redis?.stop();
});

/** Every API route, as OpenAPI path → methods. */
const ROUTES: Record<string, string[]> = {
  '/v1/backups': ['get', 'post'],
  '/v1/backups/{name}': ['delete', 'get'],
  '/v1/backups/{name}/blocks': ['get'],
  '/v1/backups/{name}/events': ['get'],
  '/v1/backups/{name}/logs': ['get'],
  '/v1/backups/{name}/cancel': ['post'],
  '/v1/backups/{name}/download': ['get'],
  '/v1/backups/{name}/resources': ['get'],
  '/v1/schedules': ['get', 'post'],
  '/v1/schedules/{name}': ['delete', 'get', 'patch'],
  '/v1/schedules/{name}/backups': ['post'],
  '/v1/session': ['delete', 'post'],
  '/v1/identity': ['get'],
  '/livez': ['get'],
  '/readyz': ['get'],
  '/metrics': ['get'],
};

type Json = Record<string, unknown>;

/** Checks the OpenAPI 3.0 rules a consumer (codegen, Swagger UI) depends on; returns every violation. */
function structuralProblems(doc: Json): string[] {
  const problems: string[] = [];
  if (typeof doc.openapi !== 'string' || !/^3\.\d+\.\d+$/.test(doc.openapi)) problems.push(`openapi: ${String(doc.openapi)}`);
  const info = doc.info as Json | undefined;
  if (typeof info?.title !== 'string' || typeof info?.version !== 'string') problems.push('info.title/version');
  const schemes = ((doc.components as Json | undefined)?.securitySchemes ?? {}) as Json;
  const paths = (doc.paths ?? {}) as Record<string, Record<string, Json>>;
  const operationIds = new Set<string>();
  for (const [path, item] of Object.entries(paths)) {
    if (!path.startsWith('/')) problems.push(`${path}: must start with /`);
    const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'].includes(method)) continue;
      const where = `${method.toUpperCase()} ${path}`;
      const responses = (op.responses ?? {}) as Record<string, Json>;
      if (Object.keys(responses).length === 0) problems.push(`${where}: no responses`);
      for (const [code, r] of Object.entries(responses)) {
        if (!/^([1-5]\d\d|[1-5]XX|default)$/.test(code)) problems.push(`${where}: response code ${code}`);
        if (typeof r.description !== 'string') problems.push(`${where}: response ${code} has no description`);
      }
      const params = (op.parameters ?? []) as Json[];
      for (const p of params) {
        if (typeof p.name !== 'string' || !['path', 'query', 'header', 'cookie'].includes(String(p.in)))
          problems.push(`${where}: bad parameter ${JSON.stringify(p)}`);
        if (p.in === 'path' && p.required !== true) problems.push(`${where}: path parameter ${String(p.name)} must be required`);
        if (!p.schema && !p.content) problems.push(`${where}: parameter ${String(p.name)} has no schema`);
      }
      for (const t of templated) {
        if (!params.some((p) => p.in === 'path' && p.name === t)) problems.push(`${where}: path parameter {${t}} is not declared`);
      }
      for (const req of (op.security ?? doc.security ?? []) as Json[]) {
        for (const scheme of Object.keys(req)) if (!(scheme in schemes)) problems.push(`${where}: unknown security scheme ${scheme}`);
      }
      if (typeof op.operationId === 'string') {
        if (operationIds.has(op.operationId)) problems.push(`${where}: duplicate operationId`);
        operationIds.add(op.operationId);
      }
    }
  }
  return problems;
}

describe('OpenAPI document', () => {
  it('is OpenAPI 3 and structurally valid', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/docs/json', headers: auth });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as Json;
    expect(doc.openapi).toMatch(/^3\./);
    expect(structuralProblems(doc)).toEqual([]);
    // Every $ref resolves.
    const text = JSON.stringify(doc);
    for (const m of text.matchAll(/"\$ref":"#\/([^"]+)"/g)) {
      const target = m[1]!.split('/').reduce<unknown>((node, key) => (node as Json | undefined)?.[key], doc);
      expect(target, m[1]).toBeDefined();
    }
  });

  it('lists every route with its methods, and nothing from the dashboard or the docs', async () => {
    const doc = (await h.app.inject({ method: 'GET', url: '/docs/json', headers: auth })).json() as { paths: Record<string, Json> };
    for (const [path, methods] of Object.entries(ROUTES)) {
      expect(doc.paths[path], path).toBeDefined();
      expect(Object.keys(doc.paths[path]!).sort(), path).toEqual(methods);
    }
    expect(Object.keys(doc.paths).sort()).toEqual(Object.keys(ROUTES).sort());
    // Each documented route really exists on the server.
    for (const [path, methods] of Object.entries(ROUTES)) {
      for (const m of methods) {
        expect(h.app.hasRoute({ method: m.toUpperCase() as 'GET', url: path.replace(/\{(\w+)\}/g, ':$1') }), `${m} ${path}`).toBe(true);
      }
    }
  });

  it('documents bodies, parameters, errors and auth where a client needs them', async () => {
    const doc = (await h.app.inject({ method: 'GET', url: '/docs/json', headers: auth })).json() as {
      paths: Record<string, Record<string, Json>>;
      security: unknown;
    };
    const create = doc.paths['/v1/backups']!.post!;
    const bodySchema = ((create.requestBody as Json).content as Json)['application/json'] as Json;
    expect(JSON.stringify(bodySchema)).toContain('"spec"');
    expect(Object.keys(create.responses as Json)).toEqual(expect.arrayContaining(['201', '400', '401', '409', '413', '415']));
    const list = doc.paths['/v1/backups']!.get!;
    expect((list.parameters as Json[]).map((p) => p.name).sort()).toEqual(['cursor', 'limit', 'phase']);
    const events = doc.paths['/v1/backups/{name}/events']!.get!;
    expect((events.parameters as Json[]).some((p) => p.in === 'header' && p.name === 'last-event-id')).toBe(true);
    expect(Object.keys(((events.responses as Json)['200'] as Json).content as Json)).toEqual(['text/event-stream']);
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.paths['/livez']!.get!.security).toEqual([]);
    expect(doc.paths['/metrics']!.get!.security).toEqual([]);
  });

  it('serves Swagger UI under /docs', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/docs/', headers: auth });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('swagger');
  });
});
