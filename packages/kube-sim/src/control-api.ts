/** The simulator's own JSON API under `/_sim/`: exec log, request counts, faults, pod phase, exec behaviour and held execs, reset. Never faulted. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { pathSegments } from './api-server.js';
import { SimErrorCode } from './api-status.js';
import { checkPodExecBehaviour, type ExecRecord, type PodExecBehaviour } from './exec-sim.js';
import { type FaultConfig, parseFaultConfig, type RequestCounts } from './faults.js';
import { isPlainObject } from './kube-object.js';
import type { PodVolumeDir } from './volume-data.js';

export interface ControlTarget {
  info(): Record<string, unknown>;
  execLog(filter: { namespace?: string; pod?: string }): ExecRecord[];
  requests(): RequestCounts;
  resetRequests(): void;
  faults(): FaultConfig;
  setFaults(config: FaultConfig): void;
  clearFaults(): void;
  setPodPhase(namespace: string, name: string, phase: string): unknown;
  setExecBehaviour(namespace: string, name: string, behaviour: PodExecBehaviour | undefined): void;
  releaseExecs(namespace: string, name: string): number;
  volumes(namespace: string, name: string): PodVolumeDir[];
  setNodeAgents(nodes: string[]): void;
  reset(): void;
}

const podPhases = ['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown'];

function send(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

function fail(res: ServerResponse, code: number, errorCode: SimErrorCode, message: string): void {
  send(res, code, { error: { code: errorCode, message } });
}

async function readJson(req: IncomingMessage): Promise<{ ok: true; value: unknown } | { ok: false; message: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 1024 * 1024) return { ok: false, message: 'body larger than 1 MiB' };
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, message: `body is not valid JSON: ${(error as Error).message}` };
  }
}

export async function handleControl(target: ControlTarget, req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
  let parts: string[];
  try {
    parts = pathSegments(url).slice(1);
  } catch {
    return fail(res, 400, SimErrorCode.CONTROL_BAD_REQUEST, 'malformed percent-encoding in the path');
  }
  const method = req.method ?? 'GET';
  const route = `${method} ${parts.map((p, i) => (parts[0] === 'pods' && (i === 1 || i === 2) ? '*' : p)).join('/')}`;
  const body = method === 'GET' || method === 'DELETE' ? ({ ok: true, value: undefined } as const) : await readJson(req);
  if (!body.ok) return fail(res, 400, SimErrorCode.CONTROL_BAD_REQUEST, body.message);
  switch (route) {
    case 'GET info':
      return send(res, 200, target.info());
    case 'GET exec-log': {
      const filter: { namespace?: string; pod?: string } = {};
      const pod = url.searchParams.get('pod');
      const namespace = url.searchParams.get('namespace');
      if (pod) filter.pod = pod;
      if (namespace) filter.namespace = namespace;
      return send(res, 200, { items: target.execLog(filter) });
    }
    case 'GET requests':
      return send(res, 200, target.requests());
    case 'POST requests/reset':
      target.resetRequests();
      return send(res, 200, target.requests());
    case 'GET faults':
      return send(res, 200, target.faults());
    case 'PUT faults': {
      const parsed = parseFaultConfig(body.value);
      if (!parsed.ok) return fail(res, 400, SimErrorCode.CONTROL_BAD_REQUEST, parsed.problems.join('; '));
      target.setFaults(parsed.config);
      return send(res, 200, target.faults());
    }
    case 'DELETE faults':
      target.clearFaults();
      return send(res, 200, target.faults());
    case 'POST pods/*/*/phase': {
      const phase = isPlainObject(body.value) ? body.value.phase : undefined;
      if (typeof phase !== 'string' || !podPhases.includes(phase)) {
        return fail(res, 400, SimErrorCode.CONTROL_BAD_REQUEST, `phase must be one of ${podPhases.join(', ')}`);
      }
      const pod = target.setPodPhase(parts[1]!, parts[2]!, phase);
      if (pod === undefined) return fail(res, 404, SimErrorCode.CONTROL_NOT_FOUND, `pod ${parts[1]}/${parts[2]} not found`);
      return send(res, 200, pod);
    }
    case 'PUT pods/*/*/exec': {
      const checked = checkPodExecBehaviour(body.value);
      if (!checked.ok) return fail(res, 400, SimErrorCode.CONTROL_BAD_REQUEST, checked.problems.join('; '));
      target.setExecBehaviour(parts[1]!, parts[2]!, checked.behaviour);
      return send(res, 200, checked.behaviour);
    }
    case 'DELETE pods/*/*/exec':
      target.setExecBehaviour(parts[1]!, parts[2]!, undefined);
      return send(res, 200, {});
    case 'POST pods/*/*/exec/release':
      return send(res, 200, { released: target.releaseExecs(parts[1]!, parts[2]!) });
    case 'GET pods/*/*/volumes':
      return send(res, 200, { items: target.volumes(parts[1]!, parts[2]!) });
    case 'PUT node-agents': {
      const nodes = isPlainObject(body.value) ? body.value.nodes : undefined;
      if (!Array.isArray(nodes) || nodes.some((node) => typeof node !== 'string' || node === '')) {
        return fail(res, 400, SimErrorCode.CONTROL_BAD_REQUEST, 'body must be {"nodes": ["<node name>", ...]}');
      }
      target.setNodeAgents(nodes as string[]);
      return send(res, 200, { nodes });
    }
    case 'POST reset':
      target.reset();
      return send(res, 200, target.info());
    default:
      return fail(res, 404, SimErrorCode.CONTROL_NOT_FOUND, `no control route ${method} ${url.pathname}`);
  }
}
