/** Fault injection for the Kubernetes API surface (never for `/_sim/`), and request counting. */
import { isPlainObject } from './kube-object.js';

export type FaultStatus = 429 | 500 | 503;

export interface FaultConfig {
  /** Added before every matching request is handled. */
  latencyMs?: number;
  /** 0..1: share of matching requests answered with one of `statuses` instead. */
  errorRate?: number;
  /** Default [429, 500, 503]; picked in turn. */
  statuses?: FaultStatus[];
  /** Retry-After (seconds) on 429 answers; default 1. */
  retryAfterSeconds?: number;
  /** Every N ms, end all open (matching) watch streams. */
  dropWatchesEveryMs?: number;
  /** 'reset' destroys the connection (default); 'end' finishes the chunked response cleanly. */
  dropWatchesMode?: 'reset' | 'end';
  /** Limit faults to these resources (`pods`, `podvolumebackups.stowage.dev`) and/or verbs (`list`, `watch`, `create`...). */
  appliesTo?: { resources?: string[]; verbs?: string[] };
}

export function parseFaultConfig(value: unknown): { ok: true; config: FaultConfig } | { ok: false; problems: string[] } {
  const problems: string[] = [];
  if (!isPlainObject(value)) return { ok: false, problems: ['faults must be a JSON object'] };
  const known = new Set(['latencyMs', 'errorRate', 'statuses', 'retryAfterSeconds', 'dropWatchesEveryMs', 'dropWatchesMode', 'appliesTo']);
  for (const key of Object.keys(value)) if (!known.has(key)) problems.push(`unknown field "${key}"`);
  const nonNegative = (key: string) => {
    const v = value[key];
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) problems.push(`${key} must be a number >= 0`);
  };
  nonNegative('latencyMs');
  nonNegative('retryAfterSeconds');
  nonNegative('dropWatchesEveryMs');
  if (value.errorRate !== undefined && (typeof value.errorRate !== 'number' || value.errorRate < 0 || value.errorRate > 1))
    problems.push('errorRate must be a number in 0..1');
  if (
    value.statuses !== undefined &&
    (!Array.isArray(value.statuses) || value.statuses.length === 0 || value.statuses.some((s) => s !== 429 && s !== 500 && s !== 503))
  ) {
    problems.push('statuses must be a non-empty array of 429, 500, 503');
  }
  if (value.dropWatchesMode !== undefined && value.dropWatchesMode !== 'reset' && value.dropWatchesMode !== 'end')
    problems.push('dropWatchesMode must be "reset" or "end"');
  if (value.appliesTo !== undefined) {
    if (!isPlainObject(value.appliesTo)) problems.push('appliesTo must be an object');
    else
      for (const key of ['resources', 'verbs'] as const) {
        const list = value.appliesTo[key];
        if (list !== undefined && (!Array.isArray(list) || list.some((s) => typeof s !== 'string')))
          problems.push(`appliesTo.${key} must be an array of strings`);
      }
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, config: value as FaultConfig };
}

export class FaultInjector {
  config: FaultConfig = {};
  private turn = 0;
  private random: () => number;

  constructor(random: () => number = Math.random) {
    this.random = random;
  }

  applies(resource: string, verb: string): boolean {
    const scope = this.config.appliesTo;
    if (!scope) return true;
    if (scope.resources && !scope.resources.includes(resource)) return false;
    if (scope.verbs && !scope.verbs.includes(verb)) return false;
    return true;
  }

  latencyFor(resource: string, verb: string): number {
    return this.config.latencyMs && this.applies(resource, verb) ? this.config.latencyMs : 0;
  }

  /** The injected failure status for this request, if any. */
  errorFor(resource: string, verb: string): FaultStatus | undefined {
    const rate = this.config.errorRate ?? 0;
    if (rate <= 0 || !this.applies(resource, verb)) return undefined;
    if (rate < 1 && this.random() >= rate) return undefined;
    const statuses = this.config.statuses ?? [429, 500, 503];
    const status = statuses[this.turn % statuses.length]!;
    this.turn += 1;
    return status;
  }
}

export interface RequestCounts {
  total: number;
  byVerb: Record<string, number>;
  /** resource (`pods`, `pods/exec`, `podvolumebackups.stowage.dev/status`) → verb → count */
  byResource: Record<string, Record<string, number>>;
  /**
   * Of the LIST requests, those with a label or field selector, by resource: what informers and
   * controllers list (a node agent's pods of its node, a worker's restored pods). A backup's plan
   * lists whole types, so the rest are its pages.
   */
  selectorLists: Record<string, number>;
  /** Watch streams are counted here, not as list/get. */
  watches: { opened: number; active: number; byResource: Record<string, number> };
  /** Answers replaced by injected faults, by status. */
  faulted: Record<string, number>;
  /** TCP connections accepted (a client that reuses connections opens few; one per request otherwise). */
  connections: number;
  /**
   * Non-watch API requests being served right now (arrival → the handler ends the response, injected latency
   * included) and the most ever at once since the last reset. Watch streams and exec sessions
   * (upgrades) are long-lived streams, counted under `watches` / `pods/exec` instead.
   */
  inFlight: { current: number; peak: number };
}

export class RequestStats {
  private counts: RequestCounts = RequestStats.empty();
  private activeWatches = 0;
  private inFlight = 0;
  private inFlightPeak = 0;

  private static empty(): RequestCounts {
    return {
      total: 0,
      byVerb: {},
      byResource: {},
      selectorLists: {},
      watches: { opened: 0, active: 0, byResource: {} },
      faulted: {},
      connections: 0,
      inFlight: { current: 0, peak: 0 },
    };
  }

  /** A non-watch request arrived; call the returned function once its response is closed (safe to call twice). */
  requestStarted(): () => void {
    this.inFlight += 1;
    if (this.inFlight > this.inFlightPeak) this.inFlightPeak = this.inFlight;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.inFlight -= 1;
    };
  }

  count(verb: string, resource: string): void {
    this.counts.total += 1;
    this.counts.byVerb[verb] = (this.counts.byVerb[verb] ?? 0) + 1;
    const perResource = this.counts.byResource[resource] ?? {};
    perResource[verb] = (perResource[verb] ?? 0) + 1;
    this.counts.byResource[resource] = perResource;
  }

  /** A LIST with a label or field selector (counted with `count` too). */
  countSelectorList(resource: string): void {
    this.counts.selectorLists[resource] = (this.counts.selectorLists[resource] ?? 0) + 1;
  }

  watchOpened(resource: string): () => void {
    this.counts.watches.opened += 1;
    this.counts.watches.byResource[resource] = (this.counts.watches.byResource[resource] ?? 0) + 1;
    this.activeWatches += 1;
    let closed = false;
    return () => {
      if (closed) return;
      closed = true;
      this.activeWatches -= 1;
    };
  }

  connectionOpened(): void {
    this.counts.connections += 1;
  }

  faulted(status: number): void {
    this.counts.faulted[String(status)] = (this.counts.faulted[String(status)] ?? 0) + 1;
  }

  snapshot(): RequestCounts {
    const copy = structuredClone(this.counts);
    copy.watches.active = this.activeWatches;
    copy.inFlight = { current: this.inFlight, peak: this.inFlightPeak };
    return copy;
  }

  /** Zeroes the counts; the in-flight peak starts again from the requests in flight now. */
  reset(): void {
    this.counts = RequestStats.empty();
    this.inFlightPeak = this.inFlight;
  }
}
