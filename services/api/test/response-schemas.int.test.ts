import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  acceptedSchema,
  backupListSchema,
  backupSchema,
  blockListSchema,
  deletedSchema,
  deletingSchema,
  errorResponseSchema,
} from '../src/api.schema.js';
import { auth, type Harness, startHarness, validBody } from './api-harness.js';

/*
 * Every JSON answer of the backups API, checked against the schema its route declares for that
 * status code (the OpenAPI document a client is generated from). A status a route does not
 * declare is a failure too: fastify would send it unchecked.
 */

type Schemas = Partial<Record<number, z.ZodType>>;
const errors = { 400: errorResponseSchema, 401: errorResponseSchema, 404: errorResponseSchema };
const ROUTES: Record<string, Schemas> = {
  'POST /v1/backups': { 201: backupSchema, 400: errorResponseSchema, 401: errorResponseSchema, 409: errorResponseSchema },
  'GET /v1/backups': { 200: backupListSchema, 400: errorResponseSchema, 401: errorResponseSchema },
  'GET /v1/backups/:name': { 200: backupSchema, ...errors },
  'GET /v1/backups/:name/blocks': { 200: blockListSchema, ...errors },
  'POST /v1/backups/:name/cancel': { 202: acceptedSchema, ...errors, 409: errorResponseSchema },
  'DELETE /v1/backups/:name': { 200: deletedSchema, 202: deletingSchema, ...errors },
};

let redis: { url: string; stop: () => Promise<void> };
let h: Harness;
const seen: string[] = [];

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url);
});
afterAll(async () => {
  await h?.close();
  await redis?.stop();
});

async function call(route: string, url: string, opts: { payload?: object; headers?: Record<string, string> } = {}) {
  const [method = 'GET'] = route.split(' ');
  const res = await h.app.inject({
    method: method as 'GET',
    url,
    headers: opts.headers ?? auth,
    ...(opts.payload ? { payload: opts.payload } : {}),
  });
  const schema = ROUTES[route]?.[res.statusCode];
  expect(schema, `${route} answered ${res.statusCode}, which it does not declare: ${res.body}`).toBeDefined();
  const parsed = schema?.safeParse(res.json());
  expect(parsed?.success, `${route} ${res.statusCode}: ${res.body}\n${JSON.stringify(parsed?.error?.issues)}`).toBe(true);
  // A field the schema calls optional is absent, never null.
  expect(res.body).not.toMatch(/"(failureReason|requestId|startedAt|completedAt|cancelRequestedAt|nextCursor)":null/);
  seen.push(`${route} ${res.statusCode}`);
  return res;
}

describe('every answer matches its declared schema', () => {
  it('a backup through its life: new, failed with a reason, canceled, deleted; and the errors', async () => {
    await call('POST /v1/backups', '/v1/backups', { payload: validBody('schema-1') });
    await call('POST /v1/backups', '/v1/backups', { payload: validBody('schema-1') }); // 409
    await call('POST /v1/backups', '/v1/backups', { payload: { spec: { includedNamespaces: ['Bad_NS'] } } }); // 400
    await call('POST /v1/backups', '/v1/backups', { payload: validBody('x'), headers: {} }); // 401
    await call('GET /v1/backups/:name', '/v1/backups/schema-1');
    await call('GET /v1/backups/:name', '/v1/backups/no-such-backup'); // 404
    await call('GET /v1/backups', '/v1/backups');
    await call('GET /v1/backups', '/v1/backups?limit=0'); // 400
    await call('GET /v1/backups/:name/blocks', '/v1/backups/schema-1/blocks');

    // Every volume of a block's pods is listed with what became of it (a plan as the planner stores it).
    const volume = (name: string, more: Record<string, unknown>) => ({ name, ...more });
    const plannedPod = (name: string, volumes: unknown[]) => ({
      namespace: 'app',
      name,
      uid: `u-${name}`,
      node: 'n1',
      itemKey: `pods/app/${name}`,
      hooks: { pre: [], post: [] },
      volumes,
    });
    await h.state.putBlockPlans('schema-1', [
      {
        id: 'blk-volumes',
        plan: {
          id: 'blk-volumes',
          items: [],
          skips: [],
          pods: [
            plannedPod('a', [volume('data', { action: 'fs-backup', claimName: 'db', pvbName: 'pvb-a' })]),
            plannedPod('b', [
              volume('data', {
                action: 'skip',
                claimName: 'db',
                pvbName: 'pvb-b',
                claimedBy: 'app/a',
                reason: 'PVC db is already backed up through pod app/a',
              }),
            ]),
            plannedPod('c', [volume('creds', { action: 'skip', reason: 'secret volumes are never backed up' })]),
          ],
        },
        items: [],
      },
    ]);
    await h.state.updateBlock('schema-1', 'blk-volumes', { state: 'WaitingForPvbs', failedPods: ['app/a'], pvbs: ['pvb-b'] });
    const blocks = (await call('GET /v1/backups/:name/blocks', '/v1/backups/schema-1/blocks')).json();
    const listed = blocks.items.find((b: { id: string }) => b.id === 'blk-volumes');
    expect(listed.volumes).toEqual([
      {
        pod: 'app/a',
        volume: 'data',
        claimName: 'db',
        outcome: 'skipped',
        reason: 'the pod failed a pre hook with onError: Fail; PVC db is backed up through pod app/b',
      },
      {
        pod: 'app/b',
        volume: 'data',
        claimName: 'db',
        outcome: 'backed-up',
        pvb: 'pvb-b',
        reason: 'took over PVC db from pod app/a, which was not backed up',
      },
      { pod: 'app/c', volume: 'creds', outcome: 'skipped', reason: 'secret volumes are never backed up' },
    ]);

    // With a failure reason (as the planner records one), and after it ended.
    await call('POST /v1/backups', '/v1/backups', { payload: validBody('schema-2') });
    await h.state.transitionPhase('schema-2', ['New'], 'FailedValidation', { failureReason: 'resource policy ConfigMap x is invalid' });
    const failed = await call('GET /v1/backups/:name', '/v1/backups/schema-2');
    expect(failed.json().failureReason).toBe('resource policy ConfigMap x is invalid');
    await call('POST /v1/backups/:name/cancel', '/v1/backups/schema-2/cancel'); // 409: ended
    await call('DELETE /v1/backups/:name', '/v1/backups/schema-2'); // 202: this harness runs no backups worker for the deletion job
    await call('DELETE /v1/backups/:name', '/v1/backups/never-was'); // 404

    // Without one, the field is absent.
    expect('failureReason' in (await call('GET /v1/backups/:name', '/v1/backups/schema-1')).json()).toBe(false);
    await call('POST /v1/backups/:name/cancel', '/v1/backups/schema-1/cancel');

    expect(new Set(seen.map((s) => s.replace(/ \d+$/, '')))).toEqual(new Set(Object.keys(ROUTES)));
  });
});
