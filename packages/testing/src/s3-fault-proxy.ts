import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** What the proxy does to one request. */
export type S3Fault =
  /** 503 with S3's `SlowDown` error (throttling). */
  | 'slowDown'
  /** 500 with `InternalError`. */
  | 'internalError'
  /** Forwards half of the request body to the server, then cuts both connections (an upload cut off). */
  | 'dropMidUpload';

export interface S3RequestInfo {
  method: string;
  /** Path and query as sent (`/bucket/key?uploadId=…&partNumber=2`). */
  url: string;
  /** Bytes of the request body announced in Content-Length (0 when none). */
  bodyBytes: number;
  /** 1 for the first request through the proxy. */
  seq: number;
}

export interface S3FaultPlan {
  /** Chance per request of each fault (0…1), drawn from a seeded generator so a run can be repeated. */
  slowDown?: number;
  internalError?: number;
  /** Applied only to requests with a body of at least 2 bytes (PUT of an object or a part). */
  dropMidUpload?: number;
  /** Extra latency per request, uniformly drawn from [min, max] ms. */
  latencyMs?: readonly [number, number];
  /** Decides alone when given (tests that cut one particular upload); the chances above are then ignored. */
  decide?: (req: S3RequestInfo) => S3Fault | undefined;
  /** Seed of the generator; default 1. */
  seed?: number;
}

/** How object storage bills a request (the classes Stowage's request meter counts in, decided here on its own). */
export type S3Operation = 'put' | 'get' | 'head' | 'list' | 'delete';

export interface S3FaultStats {
  requests: number;
  /** Requests by HTTP method (GET, PUT, HEAD, POST, DELETE): what a run costs on a billed store. */
  byMethod: Record<string, number>;
  /**
   * Requests answered (by the server or by an injected fault), by operation: PUT and POST (a
   * multipart create or complete) are `put`, POST ?delete and DELETE `delete`, a GET of the
   * bucket itself (a listing) `list`, other GETs `get`, HEAD `head`. A request cut off before
   * any answer is not counted here.
   */
  byOperation: Record<S3Operation, number>;
  /** Object bytes received in answered PUTs (not copies; the decoded length of an aws-chunked body). */
  bytesWritten: number;
  /** Object bytes sent back by answered 2xx GETs of objects (not listings). */
  bytesRead: number;
  slowDown: number;
  internalError: number;
  dropMidUpload: number;
  delayed: number;
}

export interface S3FaultProxy {
  /** `http://127.0.0.1:<port>`: point the S3 client here instead of at the server. */
  readonly endpoint: string;
  readonly port: number;
  /** Replaces the plan (an empty plan forwards everything untouched). */
  setPlan(plan: S3FaultPlan): void;
  readonly stats: Readonly<S3FaultStats>;
  close(): Promise<void>;
}

/** The billing class of a request, from its method and URL alone (path-style: `/<bucket>/<key>`). */
function operationOf(method: string, url: string): S3Operation {
  const parsed = new URL(url, 'http://proxy');
  const onBucket = parsed.pathname.replace(/^\/+|\/+$/g, '').split('/').length <= 1;
  if (method === 'HEAD') return 'head';
  if (method === 'DELETE') return 'delete';
  if (method === 'POST') return parsed.searchParams.has('delete') ? 'delete' : 'put';
  if (method === 'GET') return onBucket || parsed.searchParams.has('list-type') ? 'list' : 'get';
  return 'put';
}

/** mulberry32: small, seeded, good enough to draw faults. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function s3Error(res: ServerResponse, status: number, code: string, message: string): void {
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><RequestId>fault-proxy</RequestId></Error>`;
  res.writeHead(status, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body), connection: 'close' });
  res.end(body);
}

/**
 * An HTTP proxy in front of an S3 server that injects what object stores do under load or
 * failure: 503 SlowDown, 500 InternalError, connections cut in the middle of an upload, latency.
 * Everything else is forwarded byte for byte (signatures stay valid: the Host header is kept).
 */
export async function startS3FaultProxy(target: string, initial: S3FaultPlan = {}): Promise<S3FaultProxy> {
  const upstream = new URL(target);
  let plan = initial;
  let random = seeded(plan.seed ?? 1);
  const stats: S3FaultStats = {
    requests: 0,
    byMethod: {},
    byOperation: { put: 0, get: 0, head: 0, list: 0, delete: 0 },
    bytesWritten: 0,
    bytesRead: 0,
    slowDown: 0,
    internalError: 0,
    dropMidUpload: 0,
    delayed: 0,
  };
  const sockets = new Set<Socket>();

  const choose = (info: S3RequestInfo): S3Fault | undefined => {
    if (plan.decide) return plan.decide(info);
    const r = random();
    let edge = plan.slowDown ?? 0;
    if (r < edge) return 'slowDown';
    edge += plan.internalError ?? 0;
    if (r < edge) return 'internalError';
    edge += plan.dropMidUpload ?? 0;
    if (r < edge && info.bodyBytes >= 2) return 'dropMidUpload';
    return undefined;
  };

  const forward = (req: IncomingMessage, res: ServerResponse, cutAfter?: number, onBody?: (bytes: number) => void) => {
    const out = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        if (onBody) up.on('data', (chunk: Buffer) => onBody(chunk.length));
        up.pipe(res);
      },
    );
    out.on('error', () => res.destroy());
    if (cutAfter === undefined) {
      req.pipe(out);
      return;
    }
    let sent = 0;
    req.on('data', (chunk: Buffer) => {
      if (sent >= cutAfter) return;
      const part = chunk.subarray(0, cutAfter - sent);
      sent += part.length;
      out.write(part);
      if (sent >= cutAfter) {
        // The upload is cut off: the server sees a request that never finishes, the client a reset.
        out.destroy();
        req.socket.destroy();
      }
    });
    req.resume(); // it may have been paused for latency; a 'data' listener alone does not restart it
  };

  const server: Server = createServer((req, res) => {
    stats.requests++;
    stats.byMethod[req.method ?? 'GET'] = (stats.byMethod[req.method ?? 'GET'] ?? 0) + 1;
    const operation = operationOf(req.method ?? 'GET', req.url ?? '/');
    const isObjectPut = req.method === 'PUT' && req.headers['x-amz-copy-source'] === undefined;
    let bodyIn = 0;
    let bodyOut = 0;
    if (isObjectPut) req.on('data', (chunk: Buffer) => (bodyIn += chunk.length));
    res.once('finish', () => {
      stats.byOperation[operation]++;
      const decoded = req.headers['x-amz-decoded-content-length'];
      if (isObjectPut) stats.bytesWritten += decoded === undefined ? bodyIn : Number(decoded);
      if (operation === 'get' && res.statusCode >= 200 && res.statusCode < 300) stats.bytesRead += bodyOut;
    });
    const countOut = operation === 'get' ? (bytes: number) => (bodyOut += bytes) : undefined;
    const info: S3RequestInfo = {
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      bodyBytes: Number(req.headers['content-length'] ?? 0),
      seq: stats.requests,
    };
    const fault = choose(info);
    const [min, max] = plan.latencyMs ?? [0, 0];
    const delay = max > 0 ? min + random() * (max - min) : 0;
    const act = () => {
      if (fault === 'slowDown') {
        stats.slowDown++;
        req.resume(); // drain the body, as S3 does before it answers
        req.once('end', () => s3Error(res, 503, 'SlowDown', 'Please reduce your request rate.'));
      } else if (fault === 'internalError') {
        stats.internalError++;
        req.resume();
        req.once('end', () => s3Error(res, 500, 'InternalError', 'We encountered an internal error. Please try again.'));
      } else if (fault === 'dropMidUpload') {
        stats.dropMidUpload++;
        forward(req, res, Math.floor(info.bodyBytes / 2));
      } else {
        forward(req, res, undefined, countOut);
      }
    };
    if (delay > 0) {
      stats.delayed++;
      req.pause();
      setTimeout(act, delay);
    } else act();
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    stats,
    setPlan(next) {
      plan = next;
      random = seeded(next.seed ?? 1);
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
