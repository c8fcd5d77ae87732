/**
 * Scripted pod exec: nothing runs on the host. Each container's behaviour is a list of rules
 * matched against the command (first match wins) plus a default outcome; every exec is logged.
 */
import { isPlainObject } from './kube-object.js';

export interface ExecOutcome {
  exitCode?: number;
  stdout?: string;
  stderr?: string;
  durationMs?: number;
  /**
   * Pod exec only: the command runs until the test releases it (`sim.releaseExecs`, `POST
   * /_sim/pods/<ns>/<name>/exec/release`), then `durationMs` more — a hook held exactly as long
   * as a test needs, however slow the machine.
   */
  hold?: boolean;
}

export interface ExecRule extends ExecOutcome {
  /** Matches when argv equals this exactly. */
  command?: string[];
  /** Matches when argv starts with these elements. */
  commandPrefix?: string[];
  /** Matches when argv joined by spaces contains this text (handy for `sh -c "..."`). */
  commandContains?: string;
  /**
   * The rule applies to its first `times` matching execs in the container only (e.g. a hook that
   * fails twice, then a later rule or the default answers); absent = always.
   */
  times?: number;
}

export interface ContainerExecBehaviour {
  rules?: ExecRule[];
  default?: ExecOutcome;
}

/** Behaviour per container name; `*` applies to containers without their own entry. */
export type PodExecBehaviour = Record<string, ContainerExecBehaviour>;

export const execAnnotation = 'sim.stowage.dev/exec';

export interface ExecRecord {
  id: number;
  namespace: string;
  pod: string;
  container: string;
  command: string[];
  startedAt: string;
  endedAt: string | null;
  /** null while running and when the client went away first. */
  exitCode: number | null;
  /** The client closed the connection before the command finished. */
  aborted: boolean;
  protocol: string;
  /** Set when the API server refused the exec (pod not Running, no such container, …): why. Nothing ran. */
  refused?: string;
}

function ruleMatches(rule: ExecRule, command: string[]): boolean {
  if (rule.command && (rule.command.length !== command.length || rule.command.some((arg, i) => arg !== command[i]))) return false;
  if (rule.commandPrefix && (rule.commandPrefix.length > command.length || rule.commandPrefix.some((arg, i) => arg !== command[i])))
    return false;
  if (rule.commandContains !== undefined && !command.join(' ').includes(rule.commandContains)) return false;
  return true;
}

export interface ResolvedOutcome {
  exitCode: number;
  stdout: string;
  stderr: string;
  durationMs: number;
  hold: boolean;
}

/**
 * The outcome of one exec. `uses` counts, per `usesKey` (the container) and rule, how often a rule
 * with `times` answered; it is updated here.
 */
export function resolveExecOutcome(
  behaviour: ContainerExecBehaviour | undefined,
  command: string[],
  uses?: Map<string, number>,
  usesKey = '',
): ResolvedOutcome {
  const rules = behaviour?.rules ?? [];
  const index = rules.findIndex(
    (candidate, i) =>
      ruleMatches(candidate, command) && (candidate.times === undefined || (uses?.get(`${usesKey}#${i}`) ?? 0) < candidate.times),
  );
  const rule = index >= 0 ? rules[index] : undefined;
  if (rule?.times !== undefined && uses) uses.set(`${usesKey}#${index}`, (uses.get(`${usesKey}#${index}`) ?? 0) + 1);
  const outcome: ExecOutcome = rule ?? behaviour?.default ?? {};
  return {
    exitCode: outcome.exitCode ?? 0,
    stdout: outcome.stdout ?? '',
    stderr: outcome.stderr ?? '',
    durationMs: Math.max(0, outcome.durationMs ?? 0),
    hold: outcome.hold === true,
  };
}

function checkOutcome(value: unknown, where: string, problems: string[]): void {
  if (!isPlainObject(value)) {
    problems.push(`${where} must be an object`);
    return;
  }
  if (
    value.exitCode !== undefined &&
    (!Number.isInteger(value.exitCode) || (value.exitCode as number) < 0 || (value.exitCode as number) > 255)
  ) {
    problems.push(`${where}.exitCode must be an integer 0..255`);
  }
  for (const field of ['stdout', 'stderr', 'commandContains'] as const) {
    if (value[field] !== undefined && typeof value[field] !== 'string') problems.push(`${where}.${field} must be a string`);
  }
  if (value.durationMs !== undefined && (typeof value.durationMs !== 'number' || value.durationMs < 0))
    problems.push(`${where}.durationMs must be a number >= 0`);
  if (value.hold !== undefined && typeof value.hold !== 'boolean') problems.push(`${where}.hold must be true or false`);
  for (const field of ['command', 'commandPrefix'] as const) {
    const argv = value[field];
    if (argv !== undefined && (!Array.isArray(argv) || argv.some((arg) => typeof arg !== 'string')))
      problems.push(`${where}.${field} must be an array of strings`);
  }
}

/** Checks a behaviour document (annotation or control API body); returns the problems found. */
export function checkPodExecBehaviour(value: unknown): { ok: true; behaviour: PodExecBehaviour } | { ok: false; problems: string[] } {
  const problems: string[] = [];
  if (!isPlainObject(value)) return { ok: false, problems: ['exec behaviour must be an object keyed by container name (or "*")'] };
  for (const [container, behaviour] of Object.entries(value)) {
    if (!isPlainObject(behaviour)) {
      problems.push(`${container} must be an object with "rules" and/or "default"`);
      continue;
    }
    if (behaviour.rules !== undefined) {
      if (!Array.isArray(behaviour.rules)) problems.push(`${container}.rules must be an array`);
      else
        behaviour.rules.forEach((rule, i) => {
          checkOutcome(rule, `${container}.rules[${i}]`, problems);
          const times = isPlainObject(rule) ? rule.times : undefined;
          if (times !== undefined && (!Number.isInteger(times) || (times as number) < 1))
            problems.push(`${container}.rules[${i}].times must be an integer >= 1`);
        });
    }
    if (behaviour.default !== undefined) checkOutcome(behaviour.default, `${container}.default`, problems);
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, behaviour: value as PodExecBehaviour };
}

export function behaviourFromAnnotation(annotations: Record<string, string> | undefined): PodExecBehaviour | undefined {
  const raw = annotations?.[execAnnotation];
  if (raw === undefined) return undefined;
  try {
    const checked = checkPodExecBehaviour(JSON.parse(raw));
    return checked.ok ? checked.behaviour : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The scripted behaviour of one container: the control API's override for the pod wins, then the
 * pod's `sim.stowage.dev/exec` annotation (`*` for any container). `invalidAnnotation` is set when
 * the annotation is there but unusable, so the caller can warn.
 */
export function containerBehaviour(
  annotations: Record<string, string> | undefined,
  override: PodExecBehaviour | undefined,
  container: string,
): { behaviour: ContainerExecBehaviour | undefined; invalidAnnotation: boolean } {
  const overridden = override?.[container] ?? override?.['*'];
  if (overridden) return { behaviour: overridden, invalidAnnotation: false };
  const fromAnnotation = behaviourFromAnnotation(annotations);
  return {
    behaviour: fromAnnotation?.[container] ?? fromAnnotation?.['*'],
    invalidAnnotation: annotations?.[execAnnotation] !== undefined && !fromAnnotation,
  };
}

export class ExecLog {
  private records: ExecRecord[] = [];
  private nextId = 1;

  constructor(private readonly limit = 10_000) {}

  start(entry: Omit<ExecRecord, 'id' | 'endedAt' | 'exitCode' | 'aborted'>): ExecRecord {
    const record: ExecRecord = { id: this.nextId++, ...entry, endedAt: null, exitCode: null, aborted: false };
    this.records.push(record);
    if (this.records.length > this.limit) this.records.splice(0, this.records.length - this.limit);
    return record;
  }

  /** Records an exec the API server refused before anything ran (no exit code, not aborted). */
  refuse(entry: { namespace: string; pod: string; container: string; command: string[]; refused: string }): ExecRecord {
    const at = new Date().toISOString();
    const record = this.start({ ...entry, command: [...entry.command], startedAt: at, protocol: '' });
    record.endedAt = at;
    return record;
  }

  list(filter: { namespace?: string; pod?: string } = {}): ExecRecord[] {
    return this.records
      .filter(
        (r) => (filter.namespace === undefined || r.namespace === filter.namespace) && (filter.pod === undefined || r.pod === filter.pod),
      )
      .map((r) => ({ ...r, command: [...r.command] }));
  }

  clear(): void {
    this.records = [];
  }
}

/** Execs held by a `hold` outcome, per pod, until the control API releases them. */
export class HeldExecs {
  private readonly held = new Map<string, Set<() => void>>();

  /** Holds one exec of `namespace/pod`; `release` runs once when released. Returns the un-hold (the client went away). */
  hold(namespace: string, pod: string, release: () => void): () => void {
    const key = `${namespace}/${pod}`;
    let set = this.held.get(key);
    if (!set) {
      set = new Set();
      this.held.set(key, set);
    }
    set.add(release);
    return () => {
      set.delete(release);
      if (set.size === 0 && this.held.get(key) === set) this.held.delete(key);
    };
  }

  /** Releases every exec of the pod held now; returns how many. */
  release(namespace: string, pod: string): number {
    const key = `${namespace}/${pod}`;
    const set = this.held.get(key);
    this.held.delete(key);
    for (const release of set ?? []) release();
    return set?.size ?? 0;
  }

  releaseAll(): void {
    for (const key of [...this.held.keys()]) {
      const [namespace, pod] = key.split('/') as [string, string];
      this.release(namespace, pod);
    }
  }
}
