/**
 * TLS for the simulator. kubectl (client-go) sends credentials only over HTTPS — over plain HTTP it
 * drops the kubeconfig's token, `--as` and client certificates — so a simulator that authenticates
 * must speak TLS. One self-signed certificate (ECDSA P-256, also its own CA) per process and host,
 * made by the `openssl` tool: Node has no API that makes certificates, and one spawn per test
 * process costs ~0.1 s. Plain HTTP stays on its own port, for the control API and for clients that
 * send tokens over it anyway (client-node does).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SimError, SimErrorCode } from './api-status.js';

const run = promisify(execFile);

export interface ServerCertificate {
  cert: string;
  key: string;
}

const certificates = new Map<string, Promise<ServerCertificate>>();

/** A certificate valid for 127.0.0.1, ::1, localhost and `host`; made once per process and host. */
export function serverCertificate(host: string): Promise<ServerCertificate> {
  let made = certificates.get(host);
  if (!made) {
    made = makeCertificate(host);
    certificates.set(host, made);
    made.catch(() => certificates.delete(host));
  }
  return made;
}

async function makeCertificate(host: string): Promise<ServerCertificate> {
  const names = new Set(['IP:127.0.0.1', 'IP:::1', 'DNS:localhost']);
  if (host !== '' && host !== '0.0.0.0' && host !== '::') names.add(isIP(host) ? `IP:${host}` : `DNS:${host}`);
  const dir = await mkdtemp(join(tmpdir(), 'stowage-sim-tls-'));
  try {
    const keyFile = join(dir, 'key.pem');
    const certFile = join(dir, 'cert.pem');
    await run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '3650',
      '-subj',
      '/CN=stowage-kube-sim',
      '-addext',
      `subjectAltName=${[...names].join(',')}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
    ]);
    return { cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8') };
  } catch (error) {
    throw new SimError(
      SimErrorCode.TLS_UNAVAILABLE,
      `cannot make the simulator's TLS certificate with openssl (install it: apt-get install -y openssl): ${(error as Error).message}`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
