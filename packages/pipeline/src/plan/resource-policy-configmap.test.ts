import { validateResourcePolicyDocument } from '@stowage/core';
import { describe, expect, it } from 'vitest';
import { readPolicyDocument } from './resource-policy-configmap.js';

const yamlPolicy = `version: v1
volumePolicies:
  - conditions:
      pvcLabels:
        tier: bronze
    action:
      type: skip
`;

describe('readPolicyDocument', () => {
  it('reads the YAML document Velero users write, and JSON (which is YAML too), to the same policies', () => {
    const fromYaml = readPolicyDocument('p', { 'policy.yaml': yamlPolicy });
    const fromJson = readPolicyDocument('p', {
      policy: JSON.stringify({
        version: 'v1',
        volumePolicies: [{ conditions: { pvcLabels: { tier: 'bronze' } }, action: { type: 'skip' } }],
      }),
    });
    expect(fromYaml.ok && fromJson.ok).toBe(true);
    if (!fromYaml.ok || !fromJson.ok) return;
    const a = validateResourcePolicyDocument(fromYaml.document);
    expect(a).toEqual(validateResourcePolicyDocument(fromJson.document));
    expect(a.ok && a.value).toEqual([{ conditions: { pvcLabels: { tier: 'bronze' } }, action: { type: 'skip' } }]);
  });

  it('names the problem: no key, several keys, broken YAML', () => {
    expect(readPolicyDocument('p', undefined)).toEqual({
      ok: false,
      why: 'resource policy ConfigMap p must have exactly one data key holding the YAML document (has none)',
    });
    expect(readPolicyDocument('p', { a: 'version: v1', b: 'version: v1' })).toMatchObject({
      ok: false,
      why: expect.stringContaining('(has a, b)'),
    });
    const broken = readPolicyDocument('p', { 'policy.yaml': 'version: v1\nvolumePolicies: [\n' });
    expect(broken.ok).toBe(false);
    expect(!broken.ok && broken.why).toMatch(/^resource policy ConfigMap p, key policy\.yaml: not a YAML document: /);
  });
});
