/**
 * Pod Security admission, as kube-apiserver's built-in plugin (no exemptions configured): a
 * namespace's labels `pod-security.kubernetes.io/enforce|warn|audit` (+ `-version`: `latest` or
 * `v1.x`) choose a level:version per mode. A pod created or significantly updated in the namespace
 * is refused with 403 when it violates the enforce level, and warned about (a `Warning` header) when
 * it violates the warn level; a workload's pod template (Deployment, ReplicaSet, StatefulSet,
 * DaemonSet, Job, CronJob) is only warned about. Setting a stricter enforce level on a namespace
 * warns about the pods already there that violate it. Audit has no effect here (no audit log).
 */
import { forbidden, invalid, type StatusCause } from '../api-status.js';
import { deepEqual, isPlainObject, type KubeObject } from '../kube-object.js';
import type { ResourceType } from '../resource-registry.js';
import { type CheckResult, evaluatePod, forbiddenDetail, type Level, type PolicyVersion } from './pod-security-checks.js';

const labelPrefix = 'pod-security.kubernetes.io/';
const levels: Level[] = ['privileged', 'baseline', 'restricted'];

interface LevelVersion {
  level: Level;
  version: PolicyVersion;
}

interface NamespacePolicy {
  enforce: LevelVersion;
  warn: LevelVersion;
  audit: LevelVersion;
}

const text = (lv: LevelVersion) => `${lv.level}:${lv.version === 'latest' ? 'latest' : `v1.${lv.version}`}`;
const strictness = (level: Level) => levels.indexOf(level);

/** The policy of a namespace's labels and the label problems (an invalid enforce level fails closed: restricted). */
export function namespacePolicy(labels: Record<string, string> | undefined): { policy: NamespacePolicy; causes: StatusCause[] } {
  const policy: NamespacePolicy = {
    enforce: { level: 'privileged', version: 'latest' },
    warn: { level: 'privileged', version: 'latest' },
    audit: { level: 'privileged', version: 'latest' },
  };
  const causes: StatusCause[] = [];
  const bad = (label: string, value: string, message: string) =>
    causes.push({
      reason: 'FieldValueInvalid',
      field: `metadata.labels[${label}]`,
      message: `Invalid value: ${JSON.stringify(value)}: ${message}`,
    });
  let hasEnforceLevel = false;
  let hasWarnLevel = false;
  let hasWarnVersion = false;
  for (const mode of ['enforce', 'audit', 'warn'] as const) {
    const levelLabel = labelPrefix + mode;
    const versionLabel = `${levelLabel}-version`;
    const level = labels?.[levelLabel];
    if (level !== undefined) {
      if ((levels as string[]).includes(level)) {
        policy[mode].level = level as Level;
        if (mode === 'enforce') hasEnforceLevel = true;
      } else {
        // enforce fails closed, warn and audit fail open
        policy[mode].level = mode === 'enforce' ? 'restricted' : 'privileged';
        bad(levelLabel, level, 'must be one of privileged, baseline, restricted');
      }
      if (mode === 'warn') hasWarnLevel = true;
    }
    const version = labels?.[versionLabel];
    if (version !== undefined) {
      if (mode === 'warn') hasWarnVersion = true;
      const match = /^v1\.(0|[1-9][0-9]*)$/.exec(version);
      if (version === 'latest') policy[mode].version = 'latest';
      else if (match) policy[mode].version = Number(match[1]);
      else {
        policy[mode].version = 'latest';
        bad(versionLabel, version, 'must be "latest" or "v1.x"');
      }
    }
  }
  // warn defaults to a stricter enforce level, as the API server's.
  if (!hasWarnLevel && hasEnforceLevel && strictness(policy.enforce.level) > strictness(policy.warn.level)) {
    policy.warn.level = policy.enforce.level;
    if (!hasWarnVersion) policy.warn.version = policy.enforce.version;
  }
  return { policy, causes };
}

const templateOf: Record<string, (o: KubeObject) => unknown> = {
  'apps/Deployment': (o) => spec(o).template,
  'apps/ReplicaSet': (o) => spec(o).template,
  'apps/StatefulSet': (o) => spec(o).template,
  'apps/DaemonSet': (o) => spec(o).template,
  'batch/Job': (o) => spec(o).template,
  'batch/CronJob': (o) => {
    const jobTemplate = spec(o).jobTemplate;
    return isPlainObject(jobTemplate) && isPlainObject(jobTemplate.spec) ? jobTemplate.spec.template : undefined;
  },
};

function spec(o: unknown): Record<string, unknown> {
  return isPlainObject(o) && isPlainObject(o.spec) ? o.spec : {};
}

/** The pod spec as the checks see it: a volume without a source is an emptyDir (the API server's default). */
function checkedSpec(o: unknown): Record<string, unknown> {
  const s = spec(o);
  if (!Array.isArray(s.volumes)) return s;
  const volumes = s.volumes.map((v) => (isPlainObject(v) && Object.keys(v).every((k) => k === 'name') ? { ...v, emptyDir: {} } : v));
  return { ...s, volumes };
}

function metaOf(o: unknown): { annotations?: Record<string, string> } {
  const meta = isPlainObject(o) && isPlainObject(o.metadata) ? o.metadata : {};
  return isPlainObject(meta.annotations) ? { annotations: meta.annotations as Record<string, string> } : {};
}

const wouldViolate = (lv: LevelVersion, results: CheckResult[]) =>
  `would violate PodSecurity ${JSON.stringify(text(lv))}: ${forbiddenDetail(results)}`;

/** Whether a pod update changes what Pod Security looks at (images, seccomp annotations, containers), as the API server decides. */
function significantPodUpdate(pod: KubeObject, previous: KubeObject): boolean {
  const annotations = (o: KubeObject) => o.metadata.annotations ?? {};
  const seccompKey = 'seccomp.security.alpha.kubernetes.io/pod';
  if (annotations(pod)[seccompKey] !== annotations(previous)[seccompKey]) return true;
  for (const field of ['containers', 'initContainers', 'ephemeralContainers']) {
    const now = Array.isArray(spec(pod)[field]) ? (spec(pod)[field] as unknown[]) : [];
    const before = Array.isArray(spec(previous)[field]) ? (spec(previous)[field] as unknown[]) : [];
    if (now.length !== before.length) return true;
    for (let i = 0; i < now.length; i++) {
      const a = isPlainObject(now[i]) ? now[i] : {};
      const b = isPlainObject(before[i]) ? before[i] : {};
      if ((a as { image?: unknown }).image !== (b as { image?: unknown }).image) return true;
      const key = `container.seccomp.security.alpha.kubernetes.io/${String((a as { name?: unknown }).name)}`;
      if (annotations(pod)[key] !== annotations(previous)[key]) return true;
    }
  }
  return false;
}

export interface PodSecurityContext {
  /** The namespace object (undefined when it does not exist: the write fails elsewhere). */
  namespace(name: string): KubeObject | undefined;
  /** Pods of a namespace, for the warnings of a stricter enforce level. */
  podsIn(namespace: string): Iterable<KubeObject>;
}

/**
 * Admission of one write (create or update, after defaults): throws the 403 of an enforce violation
 * or the 422 of bad namespace labels; pushes `Warning` texts for warn violations.
 */
export function admitPodSecurity(
  ctx: PodSecurityContext,
  type: ResourceType,
  object: KubeObject,
  previous: KubeObject | undefined,
  subresource: string | undefined,
  warnings: string[],
): void {
  if (type.group === '' && type.kind === 'Namespace') {
    admitNamespace(ctx, object, previous, subresource, warnings);
    return;
  }
  const isPod = type.group === '' && type.kind === 'Pod';
  const template = templateOf[`${type.group}/${type.kind}`];
  if ((!isPod && !template) || subresource !== undefined) return;
  const namespace = ctx.namespace(object.metadata.namespace ?? '');
  if (!namespace) return;
  const { policy } = namespacePolicy(namespace.metadata.labels);
  if (isPod) {
    if (policy.enforce.level === 'privileged' && policy.warn.level === 'privileged') return;
    if (previous && !significantPodUpdate(object, previous)) return;
    const enforced = evaluatePod(policy.enforce.level, policy.enforce.version, metaOf(object), checkedSpec(object));
    if (enforced.length > 0)
      throw forbidden(
        'pods',
        '',
        object.metadata.name ?? '',
        `violates PodSecurity ${JSON.stringify(text(policy.enforce))}: ${forbiddenDetail(enforced)}`,
      );
    const warned = evaluatePod(policy.warn.level, policy.warn.version, metaOf(object), checkedSpec(object));
    if (warned.length > 0) warnings.push(wouldViolate(policy.warn, warned));
    return;
  }
  if (policy.warn.level === 'privileged') return;
  const podTemplate = template!(object);
  if (!isPlainObject(podTemplate)) return;
  const warned = evaluatePod(policy.warn.level, policy.warn.version, metaOf(podTemplate), checkedSpec(podTemplate));
  if (warned.length > 0) warnings.push(wouldViolate(policy.warn, warned));
}

/** Namespace labels: invalid ones are 422; a stricter enforce level warns about the pods it would refuse. */
function admitNamespace(
  ctx: PodSecurityContext,
  object: KubeObject,
  previous: KubeObject | undefined,
  subresource: string | undefined,
  warnings: string[],
) {
  if (subresource !== undefined) return;
  const { policy, causes } = namespacePolicy(object.metadata.labels);
  const before = previous ? namespacePolicy(previous.metadata.labels) : undefined;
  if (causes.length > 0 && (!before || before.causes.length === 0 || !deepEqual(before.causes, causes)))
    throw invalid('Namespace', '', object.metadata.name ?? '', causes);
  if (!before) return;
  const newEnforce = policy.enforce;
  const oldEnforce = before.policy.enforce;
  if (deepEqual(newEnforce, oldEnforce) || newEnforce.level === 'privileged') return;
  if (newEnforce.version === oldEnforce.version && strictness(newEnforce.level) <= strictness(oldEnforce.level)) return;
  const byReason = new Map<string, { pod: string; count: number }>();
  for (const pod of ctx.podsIn(object.metadata.name ?? '')) {
    const results = evaluatePod(newEnforce.level, newEnforce.version, metaOf(pod), checkedSpec(pod));
    if (results.length === 0) continue;
    const reason = results.map((r) => r.reason).join(', ');
    const seen = byReason.get(reason);
    if (seen) seen.count++;
    else byReason.set(reason, { pod: pod.metadata.name ?? '', count: 1 });
  }
  if (byReason.size === 0) return;
  warnings.push(
    `existing pods in namespace ${JSON.stringify(object.metadata.name)} violate the new PodSecurity enforce level ${JSON.stringify(text(newEnforce))}`,
  );
  // Sorted by reason, then each names one pod and how many others share it, as the API server's.
  for (const [reason, { pod, count }] of [...byReason].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    warnings.push(
      count === 1
        ? `${pod}: ${reason}`
        : count === 2
          ? `${pod} (and 1 other pod): ${reason}`
          : `${pod} (and ${count - 1} other pods): ${reason}`,
    );
}
