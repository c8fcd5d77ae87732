import * as k8s from '@kubernetes/client-node';
import WebSocket from 'ws';
import type { Simulator } from '../src/index.js';

export function kubeConfigFor(sim: Simulator): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromString(sim.kubeconfigYaml);
  return kc;
}

/** Resolves when `predicate` holds, polling every 10 ms; rejects after `timeoutMs`. */
export async function waitFor(predicate: () => boolean, timeoutMs = 5000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export function apiExceptionBody(error: unknown): {
  code?: number;
  reason?: string;
  message?: string;
  details?: { causes?: { field?: string; reason?: string }[] };
} {
  const body = (error as { body?: unknown }).body;
  return typeof body === 'string' ? JSON.parse(body) : (body as never);
}

/**
 * A WebSocket transport for client-node's `Exec` built on `ws` directly. Under vitest, client-node's
 * own transport gets an `isomorphic-ws` default export that is not a constructor; `Exec` itself (URL,
 * query, stream demultiplexing, status parsing) is client-node's unmodified code.
 */
export function execTransport(kc: k8s.KubeConfig): NonNullable<ConstructorParameters<typeof k8s.Exec>[1]> {
  return {
    connect: async (path: string, _text: unknown, binaryHandler: ((stream: number, data: Buffer) => boolean) | null) => {
      const server = kc.getCurrentCluster()!.server.replace(/^http/, 'ws');
      const opts: Record<string, unknown> = {};
      await kc.applyToHTTPSOptions(opts as never);
      return await new Promise<WebSocket>((resolve, reject) => {
        const socket = new WebSocket(`${server}${path}`, ['v5.channel.k8s.io', 'v4.channel.k8s.io'], opts);
        let opened = false;
        socket.on('open', () => {
          opened = true;
          resolve(socket);
        });
        socket.on('error', (error) => {
          if (!opened) reject(error);
        });
        socket.on('message', (data: Buffer) => {
          const stream = data[0]!;
          if (stream === 255) return; // v5 close-stream frame
          if (binaryHandler && !binaryHandler(stream, data.subarray(1))) socket.close();
        });
      });
    },
  } as never;
}

/** A KubeConfig from kubeconfig text (any identity's, from `sim.kubeconfigFor`). */
export function kubeConfigFromYaml(yaml: string): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromString(yaml);
  return kc;
}

/** A raw request to the simulator's plain-HTTP port with a bearer token (or none), answering status, body and headers. */
export async function rawRequest(
  sim: Simulator,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Record<string, unknown>; text: string; headers: Headers }> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.token !== undefined) headers.Authorization = `Bearer ${options.token}`;
  const init: RequestInit = { method, headers };
  if (options.body !== undefined) {
    headers['Content-Type'] ??= 'application/json';
    init.body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  }
  const res = await fetch(`${sim.url}${path}`, init);
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text);
  } catch {
    body = {};
  }
  return { status: res.status, body, text, headers: res.headers };
}
