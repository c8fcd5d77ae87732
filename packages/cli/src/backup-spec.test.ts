import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mergeRequest, parseSelector, readSpecFile, requestFromDocument, specFromFlags } from './backup-spec.js';
import { CliError } from './errors.js';

describe('parseSelector', () => {
  it('reads kubectl selector syntax', () => {
    expect(parseSelector('app=web,tier==front')).toEqual({ matchLabels: { app: 'web', tier: 'front' } });
    expect(parseSelector('env in (prod, staging),team notin (x),!legacy,owner,app!=db')).toEqual({
      matchExpressions: [
        { key: 'env', operator: 'In', values: ['prod', 'staging'] },
        { key: 'team', operator: 'NotIn', values: ['x'] },
        { key: 'legacy', operator: 'DoesNotExist' },
        { key: 'owner', operator: 'Exists' },
        { key: 'app', operator: 'NotIn', values: ['db'] },
      ],
    });
  });

  it('names the term it cannot read', () => {
    expect(() => parseSelector('a=b,,c=d')).toThrow(/empty term/);
    expect(() => parseSelector('a=b=c')).toThrow(/"a=b=c" is not understood/);
  });
});

describe('specFromFlags / mergeRequest', () => {
  it('sets only what was given', () => {
    expect(specFromFlags({})).toEqual({});
    expect(
      specFromFlags({
        includeNamespaces: 'shop, media',
        excludeNamespaces: 'kube-system',
        includeResources: 'pods,persistentvolumeclaims',
        selector: 'app=web',
        defaultVolumesToFsBackup: true,
        fsBackupTimeout: '1h',
      }),
    ).toEqual({
      includedNamespaces: ['shop', 'media'],
      excludedNamespaces: ['kube-system'],
      includedResources: ['pods', 'persistentvolumeclaims'],
      labelSelector: { matchLabels: { app: 'web' } },
      defaultVolumesToFsBackup: true,
      fsBackupTimeout: '1h',
    });
  });

  it('lets flags override the file', () => {
    const file = { name: 'from-file', spec: { includedNamespaces: ['a'], ttl: '24h' } };
    expect(mergeRequest(file, { name: 'flag', includeNamespaces: 'b' })).toEqual({
      name: 'flag',
      spec: { includedNamespaces: ['b'], ttl: '24h' },
    });
    expect(mergeRequest(undefined, {})).toEqual({ spec: {} });
  });
});

describe('spec documents', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'stowage-cli-spec-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('accepts a request body, a Velero Backup manifest and a bare spec, in YAML or JSON', async () => {
    await writeFile(join(dir, 'req.json'), JSON.stringify({ name: 'nightly', spec: { includedNamespaces: ['shop'] } }));
    await writeFile(
      join(dir, 'velero.yaml'),
      'apiVersion: velero.io/v1\nkind: Backup\nmetadata:\n  name: nightly\nspec:\n  includedNamespaces: [shop]\n',
    );
    await writeFile(join(dir, 'bare.yaml'), 'includedNamespaces:\n  - shop\n');
    expect(await readSpecFile(join(dir, 'req.json'))).toEqual({ name: 'nightly', spec: { includedNamespaces: ['shop'] } });
    expect(await readSpecFile(join(dir, 'velero.yaml'))).toEqual({ name: 'nightly', spec: { includedNamespaces: ['shop'] } });
    expect(await readSpecFile(join(dir, 'bare.yaml'))).toEqual({ spec: { includedNamespaces: ['shop'] } });
  });

  it('explains unreadable files and bad documents', async () => {
    await writeFile(join(dir, 'broken.yaml'), 'spec: [unclosed\n');
    await expect(readSpecFile(join(dir, 'missing.yaml'))).rejects.toThrow(/cannot read the spec file .*missing.yaml: no such file/);
    await expect(readSpecFile(join(dir, 'broken.yaml'))).rejects.toThrow(/broken.yaml is not valid YAML\/JSON/);
    expect(() => requestFromDocument(['a'], 'x.yaml')).toThrow(CliError);
    expect(() => requestFromDocument({ kind: 'Restore', spec: {} }, 'x.yaml')).toThrow(/kind must be Backup/);
    expect(() => requestFromDocument({ spec: {}, status: {} }, 'x.yaml')).toThrow(/unexpected top-level field\(s\) status/);
    // Labels and annotations come along from the API body and from a Velero manifest's metadata.
    expect(requestFromDocument({ spec: {}, labels: { a: 'b' } }, 'x.yaml')).toEqual({ spec: {}, labels: { a: 'b' } });
    expect(
      requestFromDocument({ kind: 'Backup', metadata: { name: 'n', labels: { a: 'b' }, annotations: { c: 'd' } }, spec: {} }, 'x.yaml'),
    ).toEqual({ name: 'n', labels: { a: 'b' }, annotations: { c: 'd' }, spec: {} });
  });
});
