import { startSimulator } from '@stowage/kube-sim';

const sim = await startSimulator({ materializeVolumes: 'none' });
const base = `${sim.url}/apis/stowage.dev/v1alpha1/namespaces/stowage/podvolumebackups`;
const body = {
  metadata: { name: 'x' },
  spec: { node: 'n', pod: { namespace: 'a', name: 'b', uid: 'c' }, volume: 'v', backupStorageLocation: 'd' },
};
let r = await fetch(base, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
console.log(r.status);
r = await fetch(`${base}/x/status`, {
  method: 'PATCH',
  body: JSON.stringify({ status: { phase: 'Bogus' } }),
  headers: { 'content-type': 'application/merge-patch+json' },
});
console.log(r.status, await r.text());
r = await fetch(base, {
  method: 'POST',
  body: JSON.stringify({ ...body, metadata: { name: 'y' }, spec: { node: '' } }),
  headers: { 'content-type': 'application/json' },
});
console.log(r.status, await r.text());
await sim.close();
