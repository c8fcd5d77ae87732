import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { validateBackupRequest } from '@stowage/core';
import { describe, expect, it } from 'vitest';
import { renderCrdFiles } from './crd-files.js';
import { crdOf, openApiSchemaOf } from './crds.js';
import { namespacedBackupSpecSchema, RESOURCE_KINDS } from './kinds.js';

const base = fileURLToPath(new URL('../../../../k8s/base/', import.meta.url));

describe('the stowage.dev CRDs in k8s/base', () => {
  it.each(renderCrdFiles())('$file is what core’s schemas generate (else run pnpm --filter @stowage/api gen:crds)', ({ file, text }) => {
    expect(readFileSync(`${base}${file}`, 'utf8')).toBe(text);
  });

  it('lists every spec field core validates, so a field added to core reaches the CRD', () => {
    const backup = crdOf(RESOURCE_KINDS[0]!) as {
      spec: { versions: Array<{ schema: { openAPIV3Schema: { properties: { spec: { properties: Record<string, unknown> } } } } }> };
    };
    const fields = Object.keys(backup.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties).sort();
    expect(fields).toEqual(Object.keys(namespacedBackupSpecSchema.shape).sort());
    // and core accepts each of them (serviceAccountName is the resource's own, not the REST body's)
    const accepted = validateBackupRequest({ spec: { snapshotVolumes: true, ttl: '1h', includedNamespaces: ['a'] } });
    expect(accepted.ok).toBe(true);
  });

  it('writes nullable fields and label selectors the way a structural schema must', () => {
    const spec = openApiSchemaOf(namespacedBackupSpecSchema) as { properties: Record<string, Record<string, unknown>> };
    expect(spec.properties.includeClusterResources).toEqual({ type: 'boolean', nullable: true });
    expect(spec.properties.labelSelector).toMatchObject({
      type: 'object',
      nullable: true,
      properties: { matchLabels: { type: 'object' } },
    });
    expect(spec.properties.ttl).toEqual({ type: 'string' });
  });
});
