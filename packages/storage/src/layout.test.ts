import { describe, expect, it } from 'vitest';
import { backupLayout, groupResourceOf, itemRelativePath, itemTarballPath } from './layout.js';

describe('Velero layout', () => {
  it('names every object of a backup like Velero', () => {
    expect(backupLayout('nightly')).toEqual({
      dir: 'backups/nightly/',
      metadata: 'backups/nightly/velero-backup.json',
      tarball: 'backups/nightly/nightly.tar.gz',
      logs: 'backups/nightly/nightly-logs.gz',
      podVolumeBackups: 'backups/nightly/nightly-podvolumebackups.json.gz',
      resourceList: 'backups/nightly/nightly-resource-list.json.gz',
      results: 'backups/nightly/nightly-results.gz',
      itemsPrefix: 'backups/nightly/items/',
    });
  });

  it('places namespaced and cluster-scoped items under resource.group', () => {
    const pod = { groupResource: groupResourceOf('pods', ''), namespace: 'shop', name: 'db-0' };
    const deployment = { groupResource: groupResourceOf('deployments', 'apps'), namespace: 'shop', name: 'web' };
    const pv = { groupResource: 'persistentvolumes', name: 'pv-1' };
    expect(itemTarballPath(pod)).toBe('resources/pods/namespaces/shop/db-0.json');
    expect(itemTarballPath(deployment)).toBe('resources/deployments.apps/namespaces/shop/web.json');
    expect(itemTarballPath(pv)).toBe('resources/persistentvolumes/cluster/pv-1.json');
  });

  it('refuses names that would escape their directory', () => {
    expect(() => backupLayout('../x')).toThrow(/STORAGE_BAD_NAME/);
    expect(() => itemRelativePath({ groupResource: 'pods', namespace: '..', name: 'x' })).toThrow(/STORAGE_BAD_NAME: namespace/);
  });
});
