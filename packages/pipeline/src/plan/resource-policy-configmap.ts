import { parse as parseYaml } from 'yaml';

export type PolicyDocumentRead = { ok: true; document: unknown } | { ok: false; why: string };

/**
 * The resource-policy document of a ConfigMap, as Velero stores it: exactly one data key whose
 * value is a YAML document (`version: v1` and `volumePolicies`; JSON is YAML too). Validation of
 * the document itself is core's `validateResourcePolicyDocument`.
 */
export function readPolicyDocument(name: string, data: Readonly<Record<string, string>> | undefined): PolicyDocumentRead {
  const keys = Object.keys(data ?? {});
  if (keys.length !== 1) {
    return {
      ok: false,
      why: `resource policy ConfigMap ${name} must have exactly one data key holding the YAML document (has ${keys.length === 0 ? 'none' : keys.join(', ')})`,
    };
  }
  const key = keys[0] as string;
  try {
    return { ok: true, document: parseYaml(data?.[key] ?? '', { maxAliasCount: 100 }) };
  } catch (err) {
    const first = ((err as Error).message ?? String(err)).split('\n')[0];
    return { ok: false, why: `resource policy ConfigMap ${name}, key ${key}: not a YAML document: ${first}` };
  }
}
