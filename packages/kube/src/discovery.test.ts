import { describe, expect, it } from 'vitest';
import { groupVersionPath, preferredGroupVersions, selectListableResources, splitGroupVersion } from './discovery.js';
import { apiVersionOfPath, collectionPath } from './list-all.js';

describe('discovery helpers', () => {
  it('keeps listable top-level resources and drops subresources and unlistable ones', () => {
    const resources = selectListableResources('v1', {
      resources: [
        { name: 'pods', kind: 'Pod', namespaced: true, verbs: ['get', 'list', 'watch', 'create'], shortNames: ['po'] },
        { name: 'pods/exec', kind: 'PodExecOptions', namespaced: true, verbs: ['create', 'get'] },
        { name: 'pods/status', kind: 'Pod', namespaced: true, verbs: ['get', 'patch'] },
        { name: 'bindings', kind: 'Binding', namespaced: true, verbs: ['create'] },
        { name: 'nodes', kind: 'Node', namespaced: false, verbs: ['get', 'list'] },
      ],
    });
    expect(resources).toEqual([
      {
        group: '',
        version: 'v1',
        groupVersion: 'v1',
        resource: 'pods',
        kind: 'Pod',
        namespaced: true,
        verbs: ['get', 'list', 'watch', 'create'],
        shortNames: ['po'],
      },
      {
        group: '',
        version: 'v1',
        groupVersion: 'v1',
        resource: 'nodes',
        kind: 'Node',
        namespaced: false,
        verbs: ['get', 'list'],
        shortNames: [],
      },
    ]);
  });

  it('takes the preferred version of each group', () => {
    expect(
      preferredGroupVersions({
        groups: [
          {
            name: 'autoscaling',
            preferredVersion: { groupVersion: 'autoscaling/v2' },
            versions: [{ groupVersion: 'autoscaling/v2' }, { groupVersion: 'autoscaling/v1' }],
          },
          { name: 'odd', versions: [{ groupVersion: 'odd/v1beta1' }] },
        ],
      }),
    ).toEqual(['autoscaling/v2', 'odd/v1beta1']);
  });

  it('builds paths for the core and named groups', () => {
    expect(splitGroupVersion('apps/v1')).toEqual({ group: 'apps', version: 'v1' });
    expect(splitGroupVersion('v1')).toEqual({ group: '', version: 'v1' });
    expect(groupVersionPath('', 'v1')).toBe('/api/v1');
    expect(collectionPath({ group: 'apps', version: 'v1', resource: 'deployments' }, 'shop')).toBe(
      '/apis/apps/v1/namespaces/shop/deployments',
    );
    expect(collectionPath({ group: '', version: 'v1', resource: 'nodes' })).toBe('/api/v1/nodes');
    expect(apiVersionOfPath('/apis/stowage.dev/v1alpha1/namespaces/stowage/podvolumebackups')).toBe('stowage.dev/v1alpha1');
    expect(apiVersionOfPath('/api/v1/pods')).toBe('v1');
  });
});
