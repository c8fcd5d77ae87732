import { describe, expect, it } from 'vitest';
import { decideExistingResource } from './existing-resource.js';
import type { RestoreObject } from './types.js';

const labels = { 'stowage.dev/backup-name': 'nightly', 'stowage.dev/restore-name': 'r1' };

function configMap(data: Record<string, string>, metadata: Record<string, unknown> = {}): RestoreObject {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'shop', ...metadata }, data };
}

const inCluster = (data: Record<string, string>, extraLabels: Record<string, string> = {}) =>
  configMap(data, {
    uid: 'u9',
    resourceVersion: '77',
    creationTimestamp: '2026-05-01T00:00:00Z',
    managedFields: [{ manager: 'x' }],
    labels: { app: 'web', ...extraLabels },
  });
const desired = configMap({ a: '1' }, { labels: { app: 'web', ...labels } });
const cm = { group: '', resource: 'configmaps', targetNamespace: 'shop', targetName: 'settings' };

describe('decideExistingResource', () => {
  it.each<[string, RestoreObject, 'none' | 'update', unknown]>([
    [
      'none, equal but for server metadata and labels: skipped quietly',
      inCluster({ a: '1' }),
      'none',
      { action: 'skip', result: 'exists-skipped', warning: null },
    ],
    [
      'none, different: skipped with the "already exists" warning',
      inCluster({ a: '2' }),
      'none',
      {
        action: 'skip',
        result: 'exists-skipped',
        warning:
          'could not restore configmaps shop/settings: it already exists and the in-cluster version is different from the backed-up one (existingResourcePolicy: none)',
      },
    ],
    [
      'update, different: patched to the backed-up form (restore labels too)',
      inCluster({ a: '2', b: '3' }),
      'update',
      {
        action: 'patch',
        result: 'updated',
        patch: { metadata: { labels: labels }, data: { a: '1', b: null } },
        warningIfFailed: 'could not update configmaps shop/settings to the backed-up version (existingResourcePolicy: update)',
      },
    ],
    [
      'update, equal: only the restore labels are patched, the result stays exists-skipped',
      inCluster({ a: '1' }),
      'update',
      {
        action: 'patch',
        result: 'exists-skipped',
        patch: { metadata: { labels } },
        warningIfFailed: 'could not label configmaps shop/settings with this restore',
      },
    ],
    [
      'update, equal and already labelled by this restore (a re-run): nothing to do',
      inCluster({ a: '1' }, labels),
      'update',
      { action: 'skip', result: 'exists-skipped', warning: null },
    ],
  ])('%s', (_name, existing, policy, expected) => {
    expect(decideExistingResource({ item: cm, desired, existing, policy })).toEqual(expected);
  });

  it('does not count fields the cluster filled in (a Service clusterIP, nodePort) as a difference', () => {
    const wanted: RestoreObject = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'shop', labels },
      spec: { ports: [{ port: 80 }], type: 'NodePort' },
    };
    const existing: RestoreObject = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'shop', uid: 'x', resourceVersion: '5' },
      spec: { ports: [{ port: 80, nodePort: 31000 }], type: 'NodePort', clusterIP: '10.0.0.1', clusterIPs: ['10.0.0.1'] },
      status: { loadBalancer: {} },
    };
    const item = { group: '', resource: 'services', targetNamespace: 'shop', targetName: 'web' };
    expect(decideExistingResource({ item, desired: wanted, existing, policy: 'none' })).toEqual({
      action: 'skip',
      result: 'exists-skipped',
      warning: null,
    });
    // update of a changed Service keeps the cluster's clusterIP (never nulled by the patch)
    const changed = { ...wanted, spec: { ports: [{ port: 8080 }], type: 'NodePort' } };
    const decision = decideExistingResource({ item, desired: changed, existing, policy: 'update' });
    expect(decision).toMatchObject({ action: 'patch', result: 'updated' });
    if (decision.action === 'patch') expect(decision.patch.spec).toEqual({ ports: [{ port: 8080 }] });
  });

  describe('ServiceAccount: merged whatever the policy (Velero merge_service_account_test)', () => {
    const sa = { group: '', resource: 'serviceaccounts', targetNamespace: 'shop', targetName: 'builder' };
    const backedUp: RestoreObject = {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'builder', namespace: 'shop', labels: { ...labels, team: 'a' }, annotations: { a: 'backup', b: 'backup' } },
      secrets: [{ name: 'registry' }, { name: 'shared' }],
      imagePullSecrets: [{ name: 'pull' }],
    };

    it.each(['none', 'update'] as const)('policy %s: adds what the cluster lacks, keeps what it has', (policy) => {
      const existing: RestoreObject = {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { name: 'builder', namespace: 'shop', uid: 'u', labels: { team: 'b' }, annotations: { a: 'cluster' } },
        secrets: [{ name: 'shared' }, { name: 'builder-token-xyz' }],
      };
      expect(decideExistingResource({ item: sa, desired: backedUp, existing, policy })).toEqual({
        action: 'patch',
        result: 'updated',
        patch: {
          metadata: { labels, annotations: { b: 'backup' } },
          secrets: [{ name: 'shared' }, { name: 'builder-token-xyz' }, { name: 'registry' }],
          imagePullSecrets: [{ name: 'pull' }],
        },
        warningIfFailed: 'could not merge the backed-up secrets into serviceaccounts shop/builder, which already exists',
      });
    });

    it('skips quietly when the cluster already has everything', () => {
      const existing: RestoreObject = structuredClone(backedUp);
      existing.metadata.uid = 'u';
      expect(decideExistingResource({ item: sa, desired: backedUp, existing, policy: 'none' })).toEqual({
        action: 'skip',
        result: 'exists-skipped',
        warning: null,
      });
    });
  });
});
