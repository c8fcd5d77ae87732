import type {
  Backup,
  BackupEvent,
  BackupList,
  BackupSummary,
  Block,
  BlockPage,
  CreateBackupRequest,
  Restore,
  RestoreItemPage,
  RestoreList,
  RestoreSummary,
  Schedule,
} from './api-types.js';
import { isTerminalBackupEvent } from './api-types.js';
import type { DryRunPlan } from './dry-run-plan.js';
import { CliError, CliErrorCode, type CliProblem } from './errors.js';
import { SseParser } from './sse-parser.js';

export interface ApiClientOptions {
  /** e.g. `http://127.0.0.1:8080` (a path prefix is kept: `https://host/stowage`). */
  baseUrl: string;
  token?: string | undefined;
  /** `-n`: creates namespaced backups and restores, lists only this namespace's. */
  namespace?: string | undefined;
  /** Bound of each ordinary request; default 30 s. Event streams are not bounded. */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export interface EventStreamOptions {
  /** Resume after this event id (Last-Event-ID). */
  lastEventId?: string;
  signal?: AbortSignal;
  /** Consecutive failed (re)connects tolerated before giving up; default 10. */
  maxReconnects?: number;
  /** Delay before a reconnect when the server sent no `retry:`; default 1 s. */
  reconnectDelayMs?: number;
  /** Whose events: a backup's (default) or a restore's. */
  resource?: RunResource;
}

/** The two kinds of run the API follows the same way (events, logs). */
export type RunResource = 'backups' | 'restores';

interface ErrorBody {
  error: { code: string; message: string; requestId?: string; problems?: CliProblem[] };
}

const isErrorBody = (v: unknown): v is ErrorBody =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as ErrorBody).error === 'object' &&
  (v as ErrorBody).error !== null &&
  typeof (v as ErrorBody).error.code === 'string' &&
  typeof (v as ErrorBody).error.message === 'string';

/** Parses and normalises STOWAGE_API_URL; a bad one is a config error naming the variable. */
export function parseApiUrl(raw: string | undefined): string {
  const value = raw?.trim() ?? '';
  if (value === '')
    throw new CliError(CliErrorCode.config, 'STOWAGE_API_URL is not set; set it to the API address, e.g. http://127.0.0.1:8080');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(CliErrorCode.config, `STOWAGE_API_URL ${JSON.stringify(value)} is not a URL; use e.g. http://127.0.0.1:8080`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CliError(CliErrorCode.config, `STOWAGE_API_URL must be http:// or https://, got ${url.protocol}//`);
  if (url.username || url.password)
    throw new CliError(CliErrorCode.config, 'STOWAGE_API_URL must not contain credentials; put the token in STOWAGE_API_TOKEN');
  url.search = '';
  url.hash = '';
  return url.toString().replace(/\/+$/, '');
}

/**
 * The Stowage REST API over fetch. Every failure becomes one CliError that tells the user what
 * to check: the URL when the API cannot be reached, the token on 401, the name on 404, each
 * problem with its path on a validation error.
 */
export class StowageApiClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly namespace: string | undefined;
  private readonly timeoutMs: number;
  private readonly doFetch: typeof fetch;

  constructor(opts: ApiClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.token = opts.token?.trim() || undefined;
    this.namespace = opts.namespace || undefined;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.doFetch = opts.fetch ?? fetch;
  }

  /** A create body with `-n`'s namespace (the API then narrows the run to it). */
  private scoped<T extends object>(body: T): T {
    return this.namespace ? { ...body, namespace: this.namespace } : body;
  }

  private inScope<T extends { namespace?: string | undefined }>(items: T[]): T[] {
    return this.namespace ? items.filter((i) => i.namespace === this.namespace) : items;
  }

  createBackup(body: CreateBackupRequest, requestId?: string): Promise<Backup> {
    return this.json('POST', '/v1/backups', { body: this.scoped(body), headers: requestId ? { 'x-request-id': requestId } : {} });
  }

  /** POST /v1/backups?dryRun=true: the plan, with nothing created. */
  planBackup(body: CreateBackupRequest): Promise<DryRunPlan> {
    return this.json('POST', '/v1/backups?dryRun=true', { body: this.scoped(body) });
  }

  getBackup(name: string): Promise<Backup> {
    return this.json('GET', `/v1/backups/${encodeURIComponent(name)}`);
  }

  /** A page of backups (with `-n`, only that namespace's: a page may hold fewer than `limit`). */
  async listBackups(query: { phase?: string; limit?: number; cursor?: string } = {}): Promise<BackupList> {
    const q = new URLSearchParams();
    if (query.phase) q.set('phase', query.phase);
    if (query.limit) q.set('limit', String(query.limit));
    if (query.cursor) q.set('cursor', query.cursor);
    const qs = q.toString();
    const page = await this.json<BackupList>('GET', `/v1/backups${qs ? `?${qs}` : ''}`);
    return { ...page, items: this.inScope(page.items) };
  }

  /** GET /v1/backups/:name/resources: `<apiVersion>/<Kind>` → items (a finished backup's resource list). */
  backupResources(name: string): Promise<{ resources: Record<string, string[]> }> {
    return this.json('GET', `/v1/backups/${encodeURIComponent(name)}/resources`);
  }

  /** GET /v1/backups/:name/download: the resources tarball as a byte stream. */
  async downloadBackup(name: string): Promise<AsyncIterable<Uint8Array>> {
    const res = await this.send('GET', `/v1/backups/${encodeURIComponent(name)}/download`, { timeout: false, accept: 'application/gzip' });
    if (!res.ok || !res.body) throw await this.errorFrom(res);
    return res.body as unknown as AsyncIterable<Uint8Array>;
  }

  /** Every backup, page by page (newest first). */
  async allBackups(query: { phase?: string } = {}): Promise<BackupSummary[]> {
    const out: BackupSummary[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.listBackups({ ...query, limit: 1000, ...(cursor ? { cursor } : {}) });
      out.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor);
    return out;
  }

  // ---- schedules ----

  /** POST /v1/schedules/:name/backups: a backup from the schedule's template, now. */
  backupFromSchedule(name: string): Promise<BackupSummary> {
    return this.json('POST', `/v1/schedules/${encodeURIComponent(name)}/backups`);
  }

  createSchedule(body: { name: string; spec: Record<string, unknown> }): Promise<Schedule> {
    return this.json('POST', '/v1/schedules', { body });
  }

  getSchedule(name: string): Promise<Schedule> {
    return this.json('GET', `/v1/schedules/${encodeURIComponent(name)}`);
  }

  listSchedules(): Promise<{ items: Schedule[] }> {
    return this.json('GET', '/v1/schedules');
  }

  patchSchedule(name: string, spec: Record<string, unknown>): Promise<Schedule> {
    return this.json('PATCH', `/v1/schedules/${encodeURIComponent(name)}`, { body: { spec } });
  }

  deleteSchedule(name: string): Promise<{ name: string; deleted: true }> {
    return this.json('DELETE', `/v1/schedules/${encodeURIComponent(name)}`);
  }

  listBlocks(name: string, page: { limit?: number; cursor?: string } = {}): Promise<BlockPage> {
    const q = new URLSearchParams();
    if (page.limit) q.set('limit', String(page.limit));
    if (page.cursor) q.set('cursor', page.cursor);
    const qs = q.toString();
    return this.json('GET', `/v1/backups/${encodeURIComponent(name)}/blocks${qs ? `?${qs}` : ''}`);
  }

  /** Every block of a backup, page by page (plan order). */
  async allBlocks(name: string, pageSize = 500): Promise<Block[]> {
    const out: Block[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.listBlocks(name, { limit: pageSize, ...(cursor ? { cursor } : {}) });
      out.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor);
    return out;
  }

  cancelBackup(name: string): Promise<{ name: string; phase: string; cancelRequested: true }> {
    return this.json('POST', `/v1/backups/${encodeURIComponent(name)}/cancel`);
  }

  /** 200 `{deleted: true}` once gone; 202 `{deleting: true, phase}` while a running backup is canceled first. */
  deleteBackup(name: string): Promise<{ name: string; deleted: true } | { name: string; phase: string; deleting: true }> {
    return this.json('DELETE', `/v1/backups/${encodeURIComponent(name)}`);
  }

  createRestore(rawBody: { name?: string; spec: Record<string, unknown> }, requestId?: string): Promise<Restore> {
    const body = this.scoped(rawBody);
    return this.json('POST', '/v1/restores', { body, headers: requestId ? { 'x-request-id': requestId } : {} });
  }

  getRestore(name: string): Promise<Restore> {
    return this.json('GET', `/v1/restores/${encodeURIComponent(name)}`);
  }

  async listRestores(query: { phase?: string; limit?: number; cursor?: string } = {}): Promise<RestoreList> {
    const q = new URLSearchParams();
    if (query.phase) q.set('phase', query.phase);
    if (query.limit) q.set('limit', String(query.limit));
    if (query.cursor) q.set('cursor', query.cursor);
    const qs = q.toString();
    const page = await this.json<RestoreList>('GET', `/v1/restores${qs ? `?${qs}` : ''}`);
    return { ...page, items: this.inScope(page.items) };
  }

  restoreItems(name: string, query: { outcome?: string; limit?: number; cursor?: string } = {}): Promise<RestoreItemPage> {
    const q = new URLSearchParams();
    if (query.outcome) q.set('outcome', query.outcome);
    if (query.limit) q.set('limit', String(query.limit));
    if (query.cursor) q.set('cursor', query.cursor);
    const qs = q.toString();
    return this.json('GET', `/v1/restores/${encodeURIComponent(name)}/items${qs ? `?${qs}` : ''}`);
  }

  /** DELETE /v1/restores/:name: the restore's record and its log/results in storage (the restored objects stay). */
  deleteRestore(name: string): Promise<{ name: string; deleted: true }> {
    return this.json('DELETE', `/v1/restores/${encodeURIComponent(name)}`);
  }

  /** Every restore, page by page (newest first). */
  async allRestores(): Promise<RestoreSummary[]> {
    const out: RestoreSummary[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.listRestores({ limit: 1000, ...(cursor ? { cursor } : {}) });
      out.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor);
    return out;
  }

  cancelRestore(name: string): Promise<{ name: string; phase: string; cancelRequested: true }> {
    return this.json('POST', `/v1/restores/${encodeURIComponent(name)}/cancel`);
  }

  /** The run's log lines (NDJSON), one parsed object at a time: a backup's, or with `resource` a restore's. */
  async *logs(name: string, resource: RunResource = 'backups'): AsyncGenerator<Record<string, unknown>> {
    const res = await this.send('GET', `/v1/${resource}/${encodeURIComponent(name)}/logs`, { timeout: false });
    if (!res.ok) throw await this.errorFrom(res);
    for await (const line of lines(res)) {
      if (line.trim() === '') continue;
      try {
        yield JSON.parse(line) as Record<string, unknown>;
      } catch (err) {
        throw new CliError(CliErrorCode.notStowage, `the API sent a log line that is not JSON: ${line.slice(0, 80)}`, [], { cause: err });
      }
    }
  }

  /**
   * The backup's live events (SSE). Reconnects with Last-Event-ID when the connection drops and
   * ends after the event that moves the backup into a terminal phase (or when the server ends
   * the stream because the backup had already ended).
   */
  async *events(name: string, opts: EventStreamOptions = {}): AsyncGenerator<BackupEvent> {
    const maxReconnects = opts.maxReconnects ?? 10;
    const resource = opts.resource ?? 'backups';
    let lastEventId = opts.lastEventId;
    let failures = 0;
    let retryMs = opts.reconnectDelayMs ?? 1_000;
    for (;;) {
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (lastEventId) headers['last-event-id'] = lastEventId;
      let res: Response;
      try {
        res = await this.send('GET', `/v1/${resource}/${encodeURIComponent(name)}/events`, {
          headers,
          timeout: false,
          signal: opts.signal,
        });
      } catch (err) {
        if (opts.signal?.aborted || failures >= maxReconnects || (err instanceof CliError && err.code !== CliErrorCode.apiUnreachable))
          throw err;
        failures++;
        await sleep(retryMs, opts.signal);
        continue;
      }
      if (!res.ok) throw await this.errorFrom(res);
      const parser = new SseParser();
      let progressed = false;
      try {
        const decoder = new TextDecoder();
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          for (const msg of parser.feed(decoder.decode(chunk, { stream: true }))) {
            const ev = parseEvent(msg.data, msg.id, msg.event);
            if (!ev) continue;
            lastEventId = ev.id;
            progressed = true;
            failures = 0;
            yield ev;
            if (isTerminalBackupEvent(ev)) return;
          }
        }
      } catch (err) {
        if (opts.signal?.aborted) throw err;
        // dropped mid-stream: reconnect below
      }
      if (parser.retryMs !== undefined) retryMs = parser.retryMs;
      // The stream ended without the terminal event: either it dropped, or the backup had
      // already ended before we connected (the server drains and closes). Ask which.
      const now = resource === 'restores' ? await this.getRestore(name) : await this.getBackup(name);
      if (isTerminalPhase(now.phase)) return;
      if (!progressed) failures++;
      if (failures > maxReconnects)
        throw new CliError(
          CliErrorCode.streamFailed,
          `the event stream of ${resource.slice(0, -1)} "${name}" kept closing without events; try again`,
        );
      await sleep(Math.min(retryMs, 5_000), opts.signal);
    }
  }

  /** GET /readyz; true when the API says it can serve. */
  async ready(): Promise<boolean> {
    try {
      const res = await this.send('GET', '/readyz', { timeoutMs: 2_000 });
      await res.body?.cancel();
      return res.status === 200;
    } catch {
      return false;
    }
  }

  private async json<T>(method: string, path: string, opts: { body?: unknown; headers?: Record<string, string> } = {}): Promise<T> {
    const res = await this.send(method, path, opts);
    if (!res.ok) throw await this.errorFrom(res);
    const text = await res.text();
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new CliError(
        CliErrorCode.notStowage,
        `the server at ${this.baseUrl} answered ${method} ${path} with something that is not JSON; is STOWAGE_API_URL the Stowage API?`,
        [],
        { cause: err },
      );
    }
  }

  private async send(
    method: string,
    path: string,
    opts: {
      body?: unknown;
      headers?: Record<string, string>;
      timeout?: boolean;
      timeoutMs?: number;
      signal?: AbortSignal | undefined;
      accept?: string;
    } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = { accept: opts.accept ?? 'application/json', ...opts.headers };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    const signals: AbortSignal[] = [];
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    if (opts.timeout !== false) signals.push(AbortSignal.timeout(timeoutMs));
    if (opts.signal) signals.push(opts.signal);
    try {
      return await this.doFetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
        ...(signals.length > 0 ? { signal: AbortSignal.any(signals) } : {}),
      });
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      if ((err as Error).name === 'TimeoutError')
        throw new CliError(CliErrorCode.apiTimeout, `the Stowage API at ${this.baseUrl} did not answer within ${timeoutMs / 1000} s`, [], {
          cause: err,
        });
      throw new CliError(
        CliErrorCode.apiUnreachable,
        `cannot reach the Stowage API at ${this.baseUrl} (${networkReason(err)}); is it running, and is STOWAGE_API_URL right?`,
        [],
        { cause: err },
      );
    }
  }

  private async errorFrom(res: Response): Promise<CliError> {
    const text = await res.text().catch(() => '');
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (!isErrorBody(body)) {
      return new CliError(
        CliErrorCode.notStowage,
        `the server at ${this.baseUrl} answered HTTP ${res.status} without a Stowage error body; is STOWAGE_API_URL the Stowage API?`,
      );
    }
    const { code, message, problems } = body.error;
    switch (res.status) {
      case 401:
        return this.token
          ? new CliError(CliErrorCode.apiUnauthorized, `the API refused the token (${message}); check STOWAGE_API_TOKEN`)
          : new CliError(CliErrorCode.apiUnauthorized, 'the API needs a token: set STOWAGE_API_TOKEN to one of the API tokens');
      case 404:
        if (code === 'API_ROUTE_NOT_FOUND')
          return new CliError(
            CliErrorCode.notStowage,
            `${this.baseUrl} does not serve this Stowage API route (${message}); check STOWAGE_API_URL`,
          );
        return new CliError(CliErrorCode.notFound, message);
      case 400:
        if (problems && problems.length > 0)
          return new CliError(
            CliErrorCode.validation,
            `the API rejected the request: ${problems.length} problem${problems.length === 1 ? '' : 's'}`,
            problems,
          );
        return new CliError(CliErrorCode.validation, `the API rejected the request: ${message}`);
      case 409:
        return new CliError(CliErrorCode.conflict, message);
      case 403:
        return new CliError(CliErrorCode.forbidden, `the API refused: ${message}`);
      default:
        return new CliError(
          CliErrorCode.apiFailed,
          `the API answered ${res.status} ${code}: ${message}${body.error.requestId ? ` (request ${body.error.requestId})` : ''}`,
        );
    }
  }
}

export const isTerminalPhase = (phase: string): boolean =>
  ['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled'].includes(phase);

function parseEvent(data: string, id: string | undefined, type: string): BackupEvent | undefined {
  try {
    const parsed = JSON.parse(data) as Partial<BackupEvent>;
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    return {
      id: typeof parsed.id === 'string' ? parsed.id : (id ?? ''),
      type: typeof parsed.type === 'string' ? parsed.type : type,
      at: typeof parsed.at === 'string' ? parsed.at : new Date().toISOString(),
      data: typeof parsed.data === 'object' && parsed.data !== null ? parsed.data : {},
    };
  } catch {
    return undefined;
  }
}

function networkReason(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  if (cause?.code === 'ECONNREFUSED') return 'connection refused';
  if (cause?.code === 'ENOTFOUND' || cause?.code === 'EAI_AGAIN') return 'host not found';
  if (cause?.code) return cause.code;
  return cause?.message ?? (err as Error).message;
}

async function* lines(res: Response): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let rest = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    rest += decoder.decode(chunk, { stream: true });
    let nl = rest.indexOf('\n');
    while (nl >= 0) {
      yield rest.slice(0, nl);
      rest = rest.slice(nl + 1);
      nl = rest.indexOf('\n');
    }
  }
  rest += decoder.decode();
  if (rest) yield rest;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}
