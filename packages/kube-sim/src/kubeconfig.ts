/** A kubeconfig pointing at the simulator (plain HTTP, so `insecure-skip-tls-verify` is required by client-node). */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { stringify } from 'yaml';

export const simContextName = 'stowage-sim';
export const simToken = 'stowage-sim-token';

export function kubeconfigYaml(url: string, namespace = 'default'): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: simContextName, cluster: { server: url, 'insecure-skip-tls-verify': true } }],
    users: [{ name: simContextName, user: { token: simToken } }],
    contexts: [{ name: simContextName, context: { cluster: simContextName, user: simContextName, namespace } }],
    'current-context': simContextName,
    preferences: {},
  });
}

/** Writes the kubeconfig (mode 0600, like kubectl does) and returns its text. */
export function writeKubeconfig(path: string, url: string, namespace = 'default'): string {
  const text = kubeconfigYaml(url, namespace);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text, { mode: 0o600 });
  return text;
}
