import { pvbName } from '@stowage/core';
import { describe, expect, it } from 'vitest';
import { statePrefixFor } from '../deps.js';
import { buildPvb } from './pvb-object.js';

describe('buildPvb', () => {
  it('builds the Velero-shaped PVB with Stowage labels and tags', () => {
    const name = pvbName('b1', 'uid-1', 'data');
    const pvb = buildPvb({
      backupName: 'b1',
      backupUid: 'buid',
      blockId: 'blk-1',
      pod: {
        namespace: 'shop',
        name: 'db-0',
        uid: 'uid-1',
        node: 'n1',
        itemKey: 'pods/shop/db-0',
        hooks: { pre: [], post: [] },
        volumes: [],
      },
      volume: { name: 'data', action: 'fs-backup', claimName: 'pvc-1', pvbName: name },
      node: 'n1',
      backupStorageLocation: 'default',
    });
    expect(pvb).toEqual({
      metadata: { name, labels: { 'stowage.dev/backup-name': 'b1', 'stowage.dev/backup-uid': 'buid', 'stowage.dev/node': 'n1' } },
      spec: {
        node: 'n1',
        pod: { namespace: 'shop', name: 'db-0', uid: 'uid-1' },
        volume: 'data',
        backupStorageLocation: 'default',
        tags: {
          backup: 'b1',
          'backup-uid': 'buid',
          pod: 'db-0',
          'pod-uid': 'uid-1',
          ns: 'shop',
          volume: 'data',
          block: 'blk-1',
          pvc: 'pvc-1',
        },
      },
    });
  });

  it('derives the state prefix from the queue prefix without braces', () => {
    expect(statePrefixFor('{stowage}')).toBe('stowage');
    expect(statePrefixFor('{t-1}')).toBe('t-1');
    expect(statePrefixFor('{}')).toBe('stowage');
  });
});
