import { invalid, type StatusCause } from './api-status.js';
import { isPlainObject, type KubeObject } from './kube-object.js';

/*
 * What the API server's Service REST storage does with addresses: a Service created without a
 * clusterIP gets one, a NodePort/LoadBalancer port without a nodePort gets one from 30000-32767,
 * and one that asks for an address another Service holds is refused (422, naming the field). An
 * update that leaves them out keeps the allocated ones (Kubernetes' patchAllocatedValues). Without
 * this a restore's Service handling (clusterIP cleared, nodePorts kept only with preserveNodePorts)
 * could not be told apart from the simulator's silence.
 */

const NODE_PORT_MIN = 30000;
const NODE_PORT_MAX = 32767;

type Json = Record<string, unknown>;
const record = (v: unknown): Json => (isPlainObject(v) ? v : {});
const ports = (spec: Json): Json[] => (Array.isArray(spec.ports) ? spec.ports.map(record) : []);

function takesClusterIP(spec: Json): boolean {
  return spec.type !== 'ExternalName' && spec.clusterIP !== 'None';
}
function takesNodePorts(spec: Json): boolean {
  return spec.type === 'NodePort' || spec.type === 'LoadBalancer';
}

function used(others: Iterable<KubeObject>): { ips: Set<string>; nodePorts: Set<number> } {
  const ips = new Set<string>();
  const nodePorts = new Set<number>();
  for (const other of others) {
    const spec = record(other.spec);
    if (typeof spec.clusterIP === 'string' && spec.clusterIP !== '' && spec.clusterIP !== 'None') ips.add(spec.clusterIP);
    for (const port of ports(spec)) if (typeof port.nodePort === 'number') nodePorts.add(port.nodePort);
  }
  return { ips, nodePorts };
}

function nextFreeIP(ips: Set<string>): string {
  for (let i = 10; i < 65_536; i++) {
    const ip = `10.96.${Math.floor(i / 256)}.${i % 256}`;
    if (!ips.has(ip)) return ip;
  }
  throw new Error('the simulated service range 10.96.0.0/16 is full');
}

/**
 * The Service as stored: addresses allocated, or those of `previous` (an update) kept. `others` are
 * every other stored Service. Throws an Invalid ApiError when a requested address is taken.
 */
export function allocateServiceAddresses(service: KubeObject, others: Iterable<KubeObject>, previous?: KubeObject): KubeObject {
  const spec: Json = { ...record(service.spec) };
  const before = record(previous?.spec);
  const taken = used(others);
  const causes: StatusCause[] = [];
  const name = service.metadata.name ?? '';

  if (takesClusterIP(spec)) {
    if ((spec.clusterIP === undefined || spec.clusterIP === '') && typeof before.clusterIP === 'string') {
      spec.clusterIP = before.clusterIP;
      if (before.clusterIPs !== undefined) spec.clusterIPs = before.clusterIPs;
    }
    if (typeof spec.clusterIP === 'string' && spec.clusterIP !== '') {
      if (spec.clusterIP !== before.clusterIP && taken.ips.has(spec.clusterIP)) {
        causes.push({
          reason: 'FieldValueInvalid',
          field: 'spec.clusterIPs',
          message: `Invalid value: []string{"${spec.clusterIP}"}: failed to allocate IP ${spec.clusterIP}: provided IP is already allocated`,
        });
      }
    } else {
      spec.clusterIP = nextFreeIP(taken.ips);
    }
    if (spec.clusterIPs === undefined) spec.clusterIPs = [spec.clusterIP];
  }

  if (takesNodePorts(spec)) {
    const previousPorts = ports(before);
    const kept = new Set(previousPorts.map((p) => p.nodePort).filter((p) => typeof p === 'number'));
    spec.ports = ports(spec).map((port, i) => {
      const next = { ...port };
      if (typeof next.nodePort !== 'number' || next.nodePort === 0) {
        const same = previousPorts.find((p) => p.port === next.port && (p.protocol ?? 'TCP') === (next.protocol ?? 'TCP'));
        if (typeof same?.nodePort === 'number') next.nodePort = same.nodePort;
      }
      if (typeof next.nodePort === 'number' && next.nodePort !== 0) {
        if (!kept.has(next.nodePort) && taken.nodePorts.has(next.nodePort)) {
          causes.push({
            reason: 'FieldValueInvalid',
            field: `spec.ports[${i}].nodePort`,
            message: `Invalid value: ${next.nodePort}: provided port is already allocated`,
          });
        }
      } else {
        let candidate = NODE_PORT_MIN;
        while (candidate <= NODE_PORT_MAX && taken.nodePorts.has(candidate)) candidate++;
        if (candidate > NODE_PORT_MAX) throw new Error('the simulated node port range is full');
        next.nodePort = candidate;
      }
      taken.nodePorts.add(next.nodePort as number);
      return next;
    });
  }

  if (causes.length > 0) throw invalid('Service', '', name, causes);
  return { ...service, spec };
}
