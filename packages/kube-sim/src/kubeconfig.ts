/** A kubeconfig pointing at the simulator. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { stringify } from 'yaml';

export const simContextName = 'stowage-sim';

/**
 * A kubeconfig for `url` whose user sends `token` (the simulator's admin token, or any identity's).
 * With `caCertificate` (PEM) the server is verified against it; without, TLS is not verified
 * (client-node needs that flag even for plain HTTP).
 */
export function kubeconfigYaml(url: string, token: string, namespace = 'default', caCertificate?: string): string {
  const cluster: Record<string, unknown> = { server: url };
  if (caCertificate) cluster['certificate-authority-data'] = Buffer.from(caCertificate).toString('base64');
  else cluster['insecure-skip-tls-verify'] = true;
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: simContextName, cluster }],
    users: [{ name: simContextName, user: { token } }],
    contexts: [{ name: simContextName, context: { cluster: simContextName, user: simContextName, namespace } }],
    'current-context': simContextName,
    preferences: {},
  });
}

/** Writes the kubeconfig (mode 0600, like kubectl does) and returns its text. */
export function writeKubeconfig(path: string, url: string, token: string, namespace = 'default', caCertificate?: string): string {
  const text = kubeconfigYaml(url, token, namespace, caCertificate);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text, { mode: 0o600 });
  return text;
}
