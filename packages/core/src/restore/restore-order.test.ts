import { describe, expect, it } from 'vitest';
import { restoreTiers } from './restore-order.js';
import { item } from './test-objects.js';
import type { BackedUpItem, RestoreItem } from './types.js';

function restoreItem(backedUp: BackedUpItem): RestoreItem {
  return { ...backedUp, targetNamespace: backedUp.namespace, targetName: backedUp.name, origin: 'selected' };
}

const items = [
  item('services', 'shop', 'web'),
  item('widgets.example.com', 'shop', 'w1'),
  item('deployments.apps', 'shop', 'web'),
  item('pods', 'shop', 'web-1'),
  item('configmaps', 'shop', 'b'),
  item('configmaps', 'media', 'a'),
  item('secrets', 'shop', 's'),
  item('clusters.cluster.x-k8s.io', 'capi', 'c1'),
  item('clusterbootstraps.run.tanzu.vmware.com', 'capi', 'cb'),
  item('namespaces', null, 'shop'),
  item('customresourcedefinitions.apiextensions.k8s.io', null, 'widgets.example.com'),
  item('persistentvolumeclaims', 'shop', 'data'),
  item('persistentvolumes', null, 'pv-1'),
  item('storageclasses.storage.k8s.io', null, 'fast'),
  item('serviceaccounts', 'shop', 'default'),
  item('rolebindings.rbac.authorization.k8s.io', 'shop', 'rb'),
  item('roles.rbac.authorization.k8s.io', 'shop', 'r'),
  item('clusterroles.rbac.authorization.k8s.io', null, 'cr'),
  item('clusterrolebindings.rbac.authorization.k8s.io', null, 'crb'),
  item('replicasets.apps', 'shop', 'web-1'),
  item('endpoints', 'shop', 'web'),
  item('limitranges', 'shop', 'lr'),
  item('priorityclasses.scheduling.k8s.io', null, 'high'),
  item('statefulsets.apps', 'shop', 'pg'),
  item('cronjobs.batch', 'shop', 'nightly'),
].map(restoreItem);

describe('restoreTiers', () => {
  it("follows Velero's priority list, then the rest in one tier, then the low-priority tail", () => {
    const tiers = restoreTiers(items);
    expect(tiers.map((tier) => tier.groupResources)).toEqual([
      ['customresourcedefinitions.apiextensions.k8s.io'],
      ['namespaces'],
      ['storageclasses.storage.k8s.io'],
      ['persistentvolumes'],
      ['persistentvolumeclaims'],
      ['clusterroles.rbac.authorization.k8s.io'],
      ['roles.rbac.authorization.k8s.io'],
      ['serviceaccounts'],
      ['clusterrolebindings.rbac.authorization.k8s.io'],
      ['rolebindings.rbac.authorization.k8s.io'],
      ['secrets'],
      ['configmaps'],
      ['limitranges'],
      ['priorityclasses.scheduling.k8s.io'],
      ['pods'],
      ['replicasets.apps'],
      ['endpoints'],
      ['services'],
      ['cronjobs.batch', 'deployments.apps', 'statefulsets.apps', 'widgets.example.com'],
      ['clusterbootstraps.run.tanzu.vmware.com'],
      ['clusters.cluster.x-k8s.io'],
    ]);
    expect(tiers.map((tier) => tier.index)).toEqual(tiers.map((_, i) => i));
    expect(tiers.reduce((sum, tier) => sum + tier.items.length, 0)).toBe(items.length);
  });

  it('marks the CRD tier to wait for Established and the namespace tier for Active', () => {
    const tiers = restoreTiers(items);
    expect(tiers.filter((tier) => tier.waitUntil !== null).map((tier) => [tier.groupResources[0], tier.waitUntil])).toEqual([
      ['customresourcedefinitions.apiextensions.k8s.io', 'crds-established'],
      ['namespaces', 'namespaces-active'],
    ]);
  });

  it('sorts the rest tier by resource, then namespace and name, so a re-plan gives the same batches', () => {
    const rest = restoreTiers([...items].reverse()).find((tier) => tier.groupResources.includes('deployments.apps'));
    expect(rest?.items.map((i) => `${i.resource}/${i.targetName}`)).toEqual([
      'cronjobs/nightly',
      'deployments/web',
      'statefulsets/pg',
      'widgets/w1',
    ]);
    const configmaps = restoreTiers(items).find((tier) => tier.groupResources[0] === 'configmaps');
    expect(configmaps?.items.map((i) => `${i.targetNamespace}/${i.targetName}`)).toEqual(['media/a', 'shop/b']);
  });

  it('leaves out empty tiers and honours a custom priority list', () => {
    const tiers = restoreTiers(
      items.filter((i) => ['secrets', 'configmaps', 'pods'].includes(i.resource)),
      {
        high: ['pods', 'configmaps'],
        low: ['secrets'],
      },
    );
    expect(tiers.map((tier) => tier.groupResources)).toEqual([['pods'], ['configmaps'], ['secrets']]);
  });

  it('returns no tiers for no items', () => {
    expect(restoreTiers([])).toEqual([]);
  });
});
