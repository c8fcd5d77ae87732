/**
 * The Pod Security Standards' checks (baseline and restricted), as the Pod Security admission of
 * Kubernetes 1.32 evaluates them: the same checks, versions, order and wording (facts of the
 * standard; our code, over the JSON form of a pod). Each check answers allowed, or a reason and a
 * detail; a policy level:version runs the checks of that version in a fixed order.
 */
import { isPlainObject } from '../kube-object.js';

export type Level = 'privileged' | 'baseline' | 'restricted';
/** A minor version of 1.x, or 'latest'. */
export type PolicyVersion = number | 'latest';

export interface CheckResult {
  allowed: boolean;
  reason?: string;
  detail?: string;
}

type Obj = Record<string, unknown>;
type PodMeta = { annotations?: Record<string, string> };
type CheckFn = (meta: PodMeta, spec: Obj) => CheckResult;

interface Check {
  id: string;
  level: 'baseline' | 'restricted';
  versions: { minimum: number; fn: CheckFn; overrides?: string[] }[];
}

/** The simulator is 1.32: `latest` and later versions evaluate as 1.32. */
export const maxPolicyMinor = 32;

const ok: CheckResult = { allowed: true };
const obj = (value: unknown): Obj | undefined => (isPlainObject(value) ? value : undefined);
const list = (value: unknown): Obj[] => (Array.isArray(value) ? value.filter(isPlainObject) : []);
const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);
const joinQuote = (items: string[]) => (items.length === 0 ? '' : `"${items.join('", "')}"`);
const pluralize = (singular: string, plural: string, count: number) => (count === 1 ? singular : plural);
/** Go's sets.String.List(): unique, sorted. */
const sortedSet = (items: Iterable<string>) => [...new Set(items)].sort();
const goQuote = (value: string) => JSON.stringify(value);

/** Init containers, then containers, then ephemeral containers, as the standard visits them. */
function containers(spec: Obj): Obj[] {
  return [...list(spec.initContainers), ...list(spec.containers), ...list(spec.ephemeralContainers)];
}
const nameOf = (container: Obj) => String(container.name ?? '');
const securityContext = (o: Obj | undefined) => obj(o?.securityContext);
const isWindows = (spec: Obj) => obj(spec.os)?.name === 'windows';

function hostNamespaces(_meta: PodMeta, spec: Obj): CheckResult {
  const found: string[] = [];
  if (spec.hostNetwork === true) found.push('hostNetwork=true');
  if (spec.hostPID === true) found.push('hostPID=true');
  if (spec.hostIPC === true) found.push('hostIPC=true');
  return found.length > 0 ? { allowed: false, reason: 'host namespaces', detail: found.join(', ') } : ok;
}

function privileged(_meta: PodMeta, spec: Obj): CheckResult {
  const bad = containers(spec)
    .filter((c) => securityContext(c)?.privileged === true)
    .map(nameOf);
  if (bad.length === 0) return ok;
  return {
    allowed: false,
    reason: 'privileged',
    detail: `${pluralize('container', 'containers', bad.length)} ${joinQuote(bad)} must not set securityContext.privileged=true`,
  };
}

const baselineCapabilities = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);

function capabilitiesBaseline(_meta: PodMeta, spec: Obj): CheckResult {
  const bad: string[] = [];
  const capabilities: string[] = [];
  for (const c of containers(spec)) {
    const caps = obj(securityContext(c)?.capabilities);
    if (!caps) continue;
    const extra = strings(caps.add).filter((cap) => !baselineCapabilities.has(cap));
    if (extra.length > 0) {
      bad.push(nameOf(c));
      capabilities.push(...extra);
    }
  }
  if (bad.length === 0) return ok;
  return {
    allowed: false,
    reason: 'non-default capabilities',
    detail: `${pluralize('container', 'containers', bad.length)} ${joinQuote(bad)} must not include ${joinQuote(sortedSet(capabilities))} in securityContext.capabilities.add`,
  };
}

function hostPathVolumes(_meta: PodMeta, spec: Obj): CheckResult {
  const bad = list(spec.volumes)
    .filter((v) => v.hostPath !== undefined && v.hostPath !== null)
    .map((v) => String(v.name ?? ''));
  if (bad.length === 0) return ok;
  return { allowed: false, reason: 'hostPath volumes', detail: `${pluralize('volume', 'volumes', bad.length)} ${joinQuote(bad)}` };
}

function hostPorts(_meta: PodMeta, spec: Obj): CheckResult {
  const bad: string[] = [];
  const ports: string[] = [];
  for (const c of containers(spec)) {
    const used = list(c.ports)
      .map((p) => p.hostPort)
      .filter((p): p is number => typeof p === 'number' && p !== 0);
    if (used.length > 0) {
      bad.push(nameOf(c));
      ports.push(...used.map(String));
    }
  }
  if (bad.length === 0) return ok;
  const distinct = sortedSet(ports);
  return {
    allowed: false,
    reason: 'hostPort',
    detail: `${pluralize('container', 'containers', bad.length)} ${joinQuote(bad)} ${pluralize('uses', 'use', bad.length)} ${pluralize('hostPort', 'hostPorts', distinct.length)} ${distinct.join(', ')}`,
  };
}

const appArmorAnnotationPrefix = 'container.apparmor.security.beta.kubernetes.io/';

function appArmorProfile(meta: PodMeta, spec: Obj): CheckResult {
  const setters: string[] = [];
  const badValues: string[] = [];
  const allowedType = (type: unknown) => type === 'RuntimeDefault' || type === 'Localhost';
  const podProfile = obj(securityContext(spec)?.appArmorProfile);
  if (podProfile && !allowedType(podProfile.type)) {
    setters.push('pod');
    badValues.push(String(podProfile.type ?? ''));
  }
  const badContainers: string[] = [];
  for (const c of containers(spec)) {
    const profile = obj(securityContext(c)?.appArmorProfile);
    if (profile && !allowedType(profile.type)) {
      badContainers.push(nameOf(c));
      badValues.push(String(profile.type ?? ''));
    }
  }
  if (badContainers.length > 0) setters.push(`${pluralize('container', 'containers', badContainers.length)} ${joinQuote(badContainers)}`);
  const annotations: string[] = [];
  for (const [key, value] of Object.entries(meta.annotations ?? {}))
    if (key.startsWith(appArmorAnnotationPrefix) && !(value === '' || value === 'runtime/default' || value.startsWith('localhost/')))
      annotations.push(`${key}=${goQuote(value)}`);
  const values = sortedSet(badValues);
  if (annotations.length > 0) {
    values.push(...annotations.sort());
    setters.push(pluralize('annotation', 'annotations', annotations.length));
  }
  if (setters.length === 0) return ok;
  return {
    allowed: false,
    reason: pluralize('forbidden AppArmor profile', 'forbidden AppArmor profiles', values.length),
    detail: `${setters.join(' and ')} must not set AppArmor profile type to ${joinQuote(values)}`,
  };
}

function seLinuxOptions(allowedTypes: Set<string>): CheckFn {
  return (_meta, spec) => {
    const setters: string[] = [];
    const badTypes: string[] = [];
    let setUser = false;
    let setRole = false;
    const valid = (options: Obj) => {
      let good = true;
      const type = typeof options.type === 'string' ? options.type : '';
      if (!allowedTypes.has(type)) {
        good = false;
        badTypes.push(type);
      }
      if (typeof options.user === 'string' && options.user !== '') {
        good = false;
        setUser = true;
      }
      if (typeof options.role === 'string' && options.role !== '') {
        good = false;
        setRole = true;
      }
      return good;
    };
    const podOptions = obj(securityContext(spec)?.seLinuxOptions);
    if (podOptions && !valid(podOptions)) setters.push('pod');
    const bad: string[] = [];
    for (const c of containers(spec)) {
      const options = obj(securityContext(c)?.seLinuxOptions);
      if (options && !valid(options)) bad.push(nameOf(c));
    }
    if (bad.length > 0) setters.push(`${pluralize('container', 'containers', bad.length)} ${joinQuote(bad)}`);
    if (setters.length === 0) return ok;
    const data: string[] = [];
    const types = sortedSet(badTypes);
    if (types.length > 0) data.push(`${pluralize('type', 'types', types.length)} ${joinQuote(types)}`);
    if (setUser) data.push('user may not be set');
    if (setRole) data.push('role may not be set');
    return {
      allowed: false,
      reason: 'seLinuxOptions',
      detail: `${setters.join(' and ')} set forbidden securityContext.seLinuxOptions: ${data.join('; ')}`,
    };
  };
}

function procMount(_meta: PodMeta, spec: Obj): CheckResult {
  const bad: string[] = [];
  const types: string[] = [];
  for (const c of containers(spec)) {
    const mount = securityContext(c)?.procMount;
    if (typeof mount === 'string' && mount !== 'Default') {
      bad.push(nameOf(c));
      types.push(mount);
    }
  }
  if (bad.length === 0) return ok;
  return {
    allowed: false,
    reason: 'procMount',
    detail: `${pluralize('container', 'containers', bad.length)} ${joinQuote(bad)} must not set securityContext.procMount to ${joinQuote(sortedSet(types))}`,
  };
}

const seccompPodAnnotation = 'seccomp.security.alpha.kubernetes.io/pod';
const seccompContainerAnnotationPrefix = 'container.seccomp.security.alpha.kubernetes.io/';
const validSeccomp = (type: unknown) => type === 'Localhost' || type === 'RuntimeDefault';

function seccompBaseline_1_0(meta: PodMeta, spec: Obj): CheckResult {
  const validAnnotation = (v: string) => v === 'runtime/default' || v === 'docker/default' || v.startsWith('localhost/');
  const forbidden: string[] = [];
  const annotations = meta.annotations ?? {};
  const podValue = annotations[seccompPodAnnotation];
  if (podValue !== undefined && !validAnnotation(podValue)) forbidden.push(`${seccompPodAnnotation}=${goQuote(podValue)}`);
  for (const c of containers(spec)) {
    const key = seccompContainerAnnotationPrefix + nameOf(c);
    const value = annotations[key];
    if (value !== undefined && !validAnnotation(value)) forbidden.push(`${key}=${goQuote(value)}`);
  }
  const distinct = sortedSet(forbidden);
  if (distinct.length === 0) return ok;
  return {
    allowed: false,
    reason: 'seccompProfile',
    detail: `forbidden ${pluralize('annotation', 'annotations', distinct.length)} ${distinct.join(', ')}`,
  };
}

/** Explicitly bad seccomp types (pod, containers); `requireSet` also refuses containers that set none where the pod sets none. */
function seccomp(spec: Obj, requireSet: boolean): CheckResult {
  const setters: string[] = [];
  const badValues: string[] = [];
  let podSet = false;
  const podProfile = obj(securityContext(spec)?.seccompProfile);
  if (podProfile) {
    if (!validSeccomp(podProfile.type)) {
      setters.push('pod');
      badValues.push(String(podProfile.type ?? ''));
    } else podSet = true;
  }
  const explicit: string[] = [];
  const implicit: string[] = [];
  for (const c of containers(spec)) {
    const profile = obj(securityContext(c)?.seccompProfile);
    if (profile) {
      if (!validSeccomp(profile.type)) {
        explicit.push(nameOf(c));
        badValues.push(String(profile.type ?? ''));
      }
    } else if (!podSet) implicit.push(nameOf(c));
  }
  if (explicit.length > 0) setters.push(`${pluralize('container', 'containers', explicit.length)} ${joinQuote(explicit)}`);
  if (setters.length > 0)
    return {
      allowed: false,
      reason: 'seccompProfile',
      detail: `${setters.join(' and ')} must not set securityContext.seccompProfile.type to ${joinQuote(sortedSet(badValues))}`,
    };
  if (requireSet && implicit.length > 0)
    return {
      allowed: false,
      reason: 'seccompProfile',
      detail: `pod or ${pluralize('container', 'containers', implicit.length)} ${joinQuote(implicit)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`,
    };
  return ok;
}

const sysctls0 = [
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_unprivileged_port_start',
];
const sysctls27 = [...sysctls0, 'net.ipv4.ip_local_reserved_ports'];
const sysctls29 = [
  ...sysctls27,
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
];
const sysctls32 = [...sysctls29, 'net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem'];

function sysctls(allowed: string[]): CheckFn {
  const set = new Set(allowed);
  return (_meta, spec) => {
    const forbidden = list(securityContext(spec)?.sysctls)
      .map((s) => String(s.name ?? ''))
      .filter((name) => !set.has(name));
    return forbidden.length > 0 ? { allowed: false, reason: 'forbidden sysctls', detail: forbidden.join(', ') } : ok;
  };
}

function windowsHostProcess(_meta: PodMeta, spec: Obj): CheckResult {
  const hostProcess = (o: Obj | undefined) => obj(securityContext(o)?.windowsOptions)?.hostProcess === true;
  const setters: string[] = [];
  if (hostProcess(spec)) setters.push('pod');
  const bad = containers(spec).filter(hostProcess).map(nameOf);
  if (bad.length > 0) setters.push(`${pluralize('container', 'containers', bad.length)} ${joinQuote(bad)}`);
  if (setters.length === 0) return ok;
  return {
    allowed: false,
    reason: 'hostProcess',
    detail: `${setters.join(' and ')} must not set securityContext.windowsOptions.hostProcess=true`,
  };
}

// --- restricted ---

const allowedVolumeSources = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'image',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);
const restrictedVolumeSources = [
  'hostPath',
  'gcePersistentDisk',
  'awsElasticBlockStore',
  'gitRepo',
  'nfs',
  'iscsi',
  'glusterfs',
  'rbd',
  'flexVolume',
  'cinder',
  'cephfs',
  'flocker',
  'fc',
  'azureFile',
  'vsphereVolume',
  'quobyte',
  'azureDisk',
  'photonPersistentDisk',
  'portworxVolume',
  'scaleIO',
  'storageos',
];

function restrictedVolumes(_meta: PodMeta, spec: Obj): CheckResult {
  const bad: string[] = [];
  const types: string[] = [];
  for (const volume of list(spec.volumes)) {
    const sources = Object.keys(volume).filter((key) => key !== 'name' && volume[key] !== null && volume[key] !== undefined);
    if (sources.some((s) => allowedVolumeSources.has(s))) continue;
    bad.push(String(volume.name ?? ''));
    types.push(restrictedVolumeSources.find((s) => sources.includes(s)) ?? 'unknown');
  }
  if (bad.length === 0) return ok;
  const distinct = sortedSet(types);
  return {
    allowed: false,
    reason: 'restricted volume types',
    detail: `${pluralize('volume', 'volumes', bad.length)} ${joinQuote(bad)} ${pluralize('uses', 'use', bad.length)} ${pluralize('restricted volume type', 'restricted volume types', distinct.length)} ${joinQuote(distinct)}`,
  };
}

function allowPrivilegeEscalation_1_8(_meta: PodMeta, spec: Obj): CheckResult {
  const bad = containers(spec)
    .filter((c) => securityContext(c)?.allowPrivilegeEscalation !== false)
    .map(nameOf);
  if (bad.length === 0) return ok;
  return {
    allowed: false,
    reason: 'allowPrivilegeEscalation != false',
    detail: `${pluralize('container', 'containers', bad.length)} ${joinQuote(bad)} must set securityContext.allowPrivilegeEscalation=false`,
  };
}

function runAsNonRoot(_meta: PodMeta, spec: Obj): CheckResult {
  const setters: string[] = [];
  let podNonRoot = false;
  const podValue = securityContext(spec)?.runAsNonRoot;
  if (typeof podValue === 'boolean') {
    if (!podValue) setters.push('pod');
    else podNonRoot = true;
  }
  const explicit: string[] = [];
  const implicit: string[] = [];
  for (const c of containers(spec)) {
    const value = securityContext(c)?.runAsNonRoot;
    if (typeof value === 'boolean') {
      if (!value) explicit.push(nameOf(c));
    } else if (!podNonRoot) implicit.push(nameOf(c));
  }
  if (explicit.length > 0) setters.push(`${pluralize('container', 'containers', explicit.length)} ${joinQuote(explicit)}`);
  if (setters.length > 0)
    return {
      allowed: false,
      reason: 'runAsNonRoot != true',
      detail: `${setters.join(' and ')} must not set securityContext.runAsNonRoot=false`,
    };
  if (implicit.length > 0)
    return {
      allowed: false,
      reason: 'runAsNonRoot != true',
      detail: `pod or ${pluralize('container', 'containers', implicit.length)} ${joinQuote(implicit)} must set securityContext.runAsNonRoot=true`,
    };
  return ok;
}

function runAsUser(_meta: PodMeta, spec: Obj): CheckResult {
  const setters: string[] = [];
  if (securityContext(spec)?.runAsUser === 0) setters.push('pod');
  const bad = containers(spec)
    .filter((c) => securityContext(c)?.runAsUser === 0)
    .map(nameOf);
  if (bad.length > 0) setters.push(`${pluralize('container', 'containers', bad.length)} ${joinQuote(bad)}`);
  if (setters.length === 0) return ok;
  return { allowed: false, reason: 'runAsUser=0', detail: `${setters.join(' and ')} must not set runAsUser=0` };
}

function capabilitiesRestricted_1_22(_meta: PodMeta, spec: Obj): CheckResult {
  const missingDropAll: string[] = [];
  const addingForbidden: string[] = [];
  const forbidden: string[] = [];
  for (const c of containers(spec)) {
    const caps = obj(securityContext(c)?.capabilities);
    if (!caps) {
      missingDropAll.push(nameOf(c));
      continue;
    }
    if (!strings(caps.drop).includes('ALL')) missingDropAll.push(nameOf(c));
    const added = strings(caps.add).filter((cap) => cap !== 'NET_BIND_SERVICE');
    if (added.length > 0) {
      addingForbidden.push(nameOf(c));
      forbidden.push(...added);
    }
  }
  const details: string[] = [];
  if (missingDropAll.length > 0)
    details.push(
      `${pluralize('container', 'containers', missingDropAll.length)} ${joinQuote(missingDropAll)} must set securityContext.capabilities.drop=["ALL"]`,
    );
  if (addingForbidden.length > 0)
    details.push(
      `${pluralize('container', 'containers', addingForbidden.length)} ${joinQuote(addingForbidden)} must not include ${joinQuote(sortedSet(forbidden))} in securityContext.capabilities.add`,
    );
  return details.length > 0 ? { allowed: false, reason: 'unrestricted capabilities', detail: details.join('; ') } : ok;
}

/** From 1.25 these restricted checks do not apply to Windows pods (spec.os.name=windows). */
const notOnWindows =
  (fn: CheckFn): CheckFn =>
  (meta, spec) =>
    isWindows(spec) ? ok : fn(meta, spec);

export const checks: Check[] = [
  { id: 'hostNamespaces', level: 'baseline', versions: [{ minimum: 0, fn: hostNamespaces }] },
  { id: 'privileged', level: 'baseline', versions: [{ minimum: 0, fn: privileged }] },
  { id: 'capabilities_baseline', level: 'baseline', versions: [{ minimum: 0, fn: capabilitiesBaseline }] },
  { id: 'hostPathVolumes', level: 'baseline', versions: [{ minimum: 0, fn: hostPathVolumes }] },
  { id: 'hostPorts', level: 'baseline', versions: [{ minimum: 0, fn: hostPorts }] },
  { id: 'appArmorProfile', level: 'baseline', versions: [{ minimum: 0, fn: appArmorProfile }] },
  {
    id: 'seLinuxOptions',
    level: 'baseline',
    versions: [
      { minimum: 0, fn: seLinuxOptions(new Set(['', 'container_t', 'container_init_t', 'container_kvm_t'])) },
      { minimum: 31, fn: seLinuxOptions(new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'])) },
    ],
  },
  { id: 'procMount', level: 'baseline', versions: [{ minimum: 0, fn: procMount }] },
  {
    id: 'seccompProfile_baseline',
    level: 'baseline',
    versions: [
      { minimum: 0, fn: seccompBaseline_1_0 },
      { minimum: 19, fn: (_meta, spec) => seccomp(spec, false) },
    ],
  },
  {
    id: 'sysctls',
    level: 'baseline',
    versions: [
      { minimum: 0, fn: sysctls(sysctls0) },
      { minimum: 27, fn: sysctls(sysctls27) },
      { minimum: 29, fn: sysctls(sysctls29) },
      { minimum: 32, fn: sysctls(sysctls32) },
    ],
  },
  { id: 'windowsHostProcess', level: 'baseline', versions: [{ minimum: 0, fn: windowsHostProcess }] },
  { id: 'restrictedVolumes', level: 'restricted', versions: [{ minimum: 0, fn: restrictedVolumes, overrides: ['hostPathVolumes'] }] },
  {
    id: 'allowPrivilegeEscalation',
    level: 'restricted',
    versions: [
      { minimum: 8, fn: allowPrivilegeEscalation_1_8 },
      { minimum: 25, fn: notOnWindows(allowPrivilegeEscalation_1_8) },
    ],
  },
  { id: 'runAsNonRoot', level: 'restricted', versions: [{ minimum: 0, fn: runAsNonRoot }] },
  { id: 'runAsUser', level: 'restricted', versions: [{ minimum: 23, fn: runAsUser }] },
  {
    id: 'seccompProfile_restricted',
    level: 'restricted',
    versions: [
      { minimum: 19, fn: (_meta, spec) => seccomp(spec, true), overrides: ['seccompProfile_baseline'] },
      { minimum: 25, fn: notOnWindows((_meta, spec) => seccomp(spec, true)), overrides: ['seccompProfile_baseline'] },
    ],
  },
  {
    id: 'capabilities_restricted',
    level: 'restricted',
    versions: [
      { minimum: 22, fn: capabilitiesRestricted_1_22, overrides: ['capabilities_baseline'] },
      { minimum: 25, fn: notOnWindows(capabilitiesRestricted_1_22), overrides: ['capabilities_baseline'] },
    ],
  },
];

/** Baseline checks by id, then restricted ones (Go's byte order of ids). */
const orderedIds = [
  ...checks
    .filter((c) => c.level === 'baseline')
    .map((c) => c.id)
    .sort(),
  ...checks
    .filter((c) => c.level === 'restricted')
    .map((c) => c.id)
    .sort(),
];

/** The check functions a level runs at a minor version, in the standard's order. */
function checksFor(level: 'baseline' | 'restricted', minor: number): CheckFn[] {
  const at = (check: Check) => [...check.versions].reverse().find((v) => v.minimum <= minor);
  const overridden = new Set<string>();
  if (level === 'restricted')
    for (const check of checks) if (check.level === 'restricted') for (const id of at(check)?.overrides ?? []) overridden.add(id);
  const active = new Map<string, CheckFn>();
  for (const check of checks) {
    if (check.level === 'restricted' && level === 'baseline') continue;
    if (overridden.has(check.id)) continue;
    const version = at(check);
    if (version) active.set(check.id, version.fn);
  }
  return orderedIds.filter((id) => active.has(id)).map((id) => active.get(id)!);
}

/** One check at a minor version (the version of it in force then), for tests of single checks. */
export function checkAt(id: string, minor: number): CheckFn | undefined {
  return [...(checks.find((c) => c.id === id)?.versions ?? [])].reverse().find((v) => v.minimum <= minor)?.fn;
}

/** The failed checks of `level:version` for a pod's metadata and spec, in the standard's order. */
export function evaluatePod(level: Level, version: PolicyVersion, meta: PodMeta, spec: Obj): CheckResult[] {
  if (level === 'privileged') return [];
  const minor = version === 'latest' || version > maxPolicyMinor ? maxPolicyMinor : version;
  return checksFor(level, minor)
    .map((fn) => fn(meta, spec))
    .filter((result) => !result.allowed);
}

/** `reason (detail), reason, …`: how the API server lists every violated check. */
export function forbiddenDetail(results: CheckResult[]): string {
  return results.map((r) => (r.detail ? `${r.reason} (${r.detail})` : `${r.reason}`)).join(', ');
}
