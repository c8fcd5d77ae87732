/** The HTTP surface of the Kubernetes API: discovery, resource CRUD, watch streams, and exec upgrades. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { type WebSocket, WebSocketServer } from 'ws';
import { parse as parseYaml } from 'yaml';
import { admitPodSecurity, type PodSecurityContext } from './admission/pod-security.js';
import { ApiError, apiError, failureStatus, type KubeStatus, notFound } from './api-status.js';
import { checkRbacWrite } from './auth/escalation.js';
import { anonymous, systemMasters, type UserInfo } from './auth/identity.js';
import { requestAttributesOf } from './auth/request-info.js';
import {
  localSubjectAccessReview,
  type ReviewContext,
  selfSubjectAccessReview,
  selfSubjectReview,
  selfSubjectRulesReview,
  subjectAccessReview,
  tokenRequest,
  tokenReview,
} from './auth/reviews.js';
import type { Security } from './auth/security.js';
import type { ClusterState, PatchType, WatchEvent } from './cluster-state.js';
import { containerBehaviour, type ExecLog, type HeldExecs, type PodExecBehaviour, resolveExecOutcome } from './exec-sim.js';
import type { FaultInjector, FaultStatus, RequestStats } from './faults.js';
import { isPlainObject, type KubeObject } from './kube-object.js';
import { openApiGroupVersionDoc, openApiRoot } from './openapi.js';
import { canEncode, decodeProtobuf, encodeProtobuf, isProtobuf, prefersProtobuf, protobufMediaType } from './protobuf.js';
import { apiVersionOf, compareKubeVersions, type ResourceType, standardVerbs, storageKey } from './resource-registry.js';
import { type ObjectFilter, parseFieldSelector, parseLabelSelector } from './selectors.js';
import { toTable, wantsTable } from './table.js';
import { watchLine } from './watch-line.js';

export const serverVersion = {
  major: '1',
  minor: '32',
  gitVersion: 'v1.32.0-stowage-sim',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2026-01-01T00:00:00Z',
  goVersion: 'go1.23.0',
  compiler: 'gc',
  platform: 'linux/amd64',
};

const maxBodyBytes = 8 * 1024 * 1024;

export interface ApiContext {
  state: ClusterState;
  faults: FaultInjector;
  stats: RequestStats;
  execLog: ExecLog;
  /** Control-API overrides of exec behaviour, keyed `namespace/pod`. */
  execOverrides: Map<string, PodExecBehaviour>;
  /** Execs whose outcome says `hold`, until the control API releases them. */
  heldExecs: HeldExecs;
  bookmarkIntervalMs: number;
  /** Logged warnings (e.g. bad exec annotations); never thrown at clients. */
  warn: (message: string) => void;
  /** Tokens, RBAC and impersonation; always there (TokenRequest and the reviews answer either way). */
  security: Security;
  /** Enforce authentication and authorization (default); false lets every request through as an admin. */
  authz: boolean;
}

/** Who an unauthenticated request is when enforcement is off (`authz: false`): allowed everything. */
const uncheckedAdmin: UserInfo = { name: 'system:admin', groups: [systemMasters, 'system:authenticated'] };

interface ActiveWatch {
  resource: string;
  end: (mode: 'reset' | 'end') => void;
}

interface ResourceRequest {
  type: ResourceType;
  namespace: string | undefined;
  name: string | undefined;
  subresource: string | undefined;
  watchPath: boolean;
}

function sendJson(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/**
 * An object answer: protobuf when the client asks for it first (kubectl's typed commands do) and the
 * kind has a message (protobuf.ts), JSON otherwise.
 */
function sendObject(req: IncomingMessage, res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
  const object = body as { apiVersion?: unknown; kind?: unknown };
  if (prefersProtobuf(req.headers.accept) && canEncode(String(object.apiVersion), String(object.kind)) && !res.headersSent) {
    const bytes = encodeProtobuf(body as Record<string, unknown>);
    res.writeHead(code, { 'Content-Type': protobufMediaType, 'Content-Length': bytes.length, ...headers });
    res.end(bytes);
    return;
  }
  sendJson(res, code, body, headers);
}

function sendStatus(res: ServerResponse, status: KubeStatus, headers: Record<string, string> = {}): void {
  sendJson(res, status.code, status, headers);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > maxBodyBytes)
      throw new ApiError({
        ...failureStatus('BadRequest', 'Request entity too large: limit is 8388608'),
        reason: 'RequestEntityTooLarge',
        code: 413,
      });
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

function parseBody(raw: Buffer, contentType: string): unknown {
  if (isProtobuf(contentType)) return decodeProtobuf(raw);
  const text = raw.toString('utf8');
  if (text.trim() === '') throw apiError('BadRequest', 'the request body is empty');
  if (/yaml/i.test(contentType)) {
    try {
      return parseYaml(text);
    } catch (error) {
      throw apiError('BadRequest', `error decoding YAML: ${(error as Error).message}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw apiError('BadRequest', `the request body is not valid JSON: ${(error as Error).message}`);
  }
}

function patchTypeOf(contentType: string): PatchType {
  const mediaType = contentType.split(';')[0]!.trim().toLowerCase();
  switch (mediaType) {
    case 'application/merge-patch+json':
      return 'merge';
    case 'application/json-patch+json':
      return 'json';
    case 'application/strategic-merge-patch+json':
      return 'strategic';
    case 'application/apply-patch+yaml':
    case 'application/apply-patch+json':
      return 'apply';
    default:
      throw apiError(
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json`,
      );
  }
}

/** `pods`, `podvolumebackups.stowage.dev`, with `/status` etc. appended for subresources. */
export function resourceLabel(type: ResourceType, subresource?: string): string {
  const base = storageKey(type);
  return subresource ? `${base}/${subresource}` : base;
}

export class KubeApi {
  private readonly watches = new Set<ActiveWatch>();
  private readonly execServer = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => {
      for (const preferred of ['v5.channel.k8s.io', 'v4.channel.k8s.io']) if (protocols.has(preferred)) return preferred;
      return false;
    },
  });
  private readonly openExecSockets = new Set<WebSocket>();
  private readonly podSecurity: PodSecurityContext = {
    namespace: (name) => this.ctx.state.store.get('namespaces', '', name),
    podsIn: (namespace) => this.ctx.state.store.list('pods', namespace),
  };

  constructor(private readonly ctx: ApiContext) {}

  /** Ends every open watch stream that faults apply to (dropped-watch injection). */
  dropWatches(mode: 'reset' | 'end'): number {
    let dropped = 0;
    for (const watch of [...this.watches]) {
      if (!this.ctx.faults.applies(watch.resource, 'watch')) continue;
      watch.end(mode);
      dropped++;
    }
    return dropped;
  }

  closeAll(): void {
    for (const watch of [...this.watches]) watch.end('end');
    for (const socket of this.openExecSockets) socket.terminate();
    this.execServer.close();
  }

  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    try {
      const segments = pathSegments(url);
      const user = this.admit(req, url, segments);
      await this.route(req, res, url, segments, user);
    } catch (error) {
      if (error instanceof ApiError) {
        sendStatus(res, error.status, error.headers);
      } else {
        this.ctx.warn(`internal error on ${req.method} ${url.pathname}: ${(error as Error)?.stack ?? String(error)}`);
        sendStatus(res, failureStatus('InternalError', `internal error: ${(error as Error)?.message ?? String(error)}`));
      }
    }
  }

  /** Applies latency and error faults; returns true when the request was answered with a fault. */
  private async applyFaults(res: ServerResponse | undefined, resource: string, verb: string): Promise<FaultStatus | undefined> {
    const latency = this.ctx.faults.latencyFor(resource, verb);
    if (latency > 0) await sleep(latency);
    const status = this.ctx.faults.errorFor(resource, verb);
    if (status === undefined) return undefined;
    this.ctx.stats.faulted(status);
    if (res) {
      const { body, headers } = this.faultAnswer(status);
      sendStatus(res, body, headers);
    }
    return status;
  }

  private faultAnswer(status: FaultStatus): { body: KubeStatus; headers: Record<string, string> } {
    if (status === 429) {
      const retryAfter = this.ctx.faults.config.retryAfterSeconds ?? 1;
      return {
        body: failureStatus(
          'TooManyRequests',
          'the server has received too many requests and has asked us to try again later (injected fault)',
          { retryAfterSeconds: retryAfter },
        ),
        headers: { 'Retry-After': String(retryAfter) },
      };
    }
    if (status === 503)
      return {
        body: failureStatus('ServiceUnavailable', 'the server is currently unable to handle the request (injected fault)'),
        headers: {},
      };
    return {
      body: failureStatus('InternalError', 'an error on the server ("injected fault") has prevented the request from succeeding'),
      headers: {},
    };
  }

  /**
   * Authentication, impersonation and authorization of a request, before anything is looked up (a
   * 401 or 403 says nothing of what exists). Returns who the request acts as.
   */
  private admit(req: IncomingMessage, url: URL, segments: string[], extraVerbs: string[] = []): UserInfo {
    const security = this.ctx.security;
    if (!this.ctx.authz) {
      // Enforcement off: a valid token still says who it is (for the reviews), anything else is an admin.
      const token = req.headers.authorization?.replace(/^bearer\s+/i, '');
      const checked = token ? security.tokens.check(token) : undefined;
      return checked?.ok ? checked.user : uncheckedAdmin;
    }
    const requester = security.authenticate(req, url.pathname);
    const user = requester === anonymous ? requester : security.impersonate(req, requester);
    const attributes = requestAttributesOf(req.method ?? 'GET', segments, url);
    security.require(user, attributes);
    for (const verb of extraVerbs) security.require(user, { ...attributes, verb });
    return user;
  }

  private reviewContext(user: UserInfo): ReviewContext {
    const security = this.ctx.security;
    const store = this.ctx.state.store;
    return {
      user,
      authorize: (subject, request) => (this.ctx.authz ? security.authorize(subject, request) : { allowed: true, reason: '' }),
      rulesFor: (subject, namespace) =>
        this.ctx.authz
          ? security.authorizer.rulesFor(subject, namespace)
          : security.authorizer.rulesFor({ ...subject, groups: [...subject.groups, systemMasters] }, namespace),
      tokens: security.tokens,
      uidOf: (resource, namespace, name) => store.get(resource, namespace, name)?.metadata.uid,
      now: () => new Date(),
    };
  }

  private async route(req: IncomingMessage, res: ServerResponse, url: URL, segments: string[], user: UserInfo): Promise<void> {
    const method = req.method ?? 'GET';
    const [first, second, third] = segments;
    // Discovery and server info.
    if (segments.length === 1 && first === 'version') return this.discovery(res, 'version', () => serverVersion);
    if (segments.length === 1 && (first === 'healthz' || first === 'readyz' || first === 'livez')) {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end('ok');
      return;
    }
    if (first === 'openapi') return this.openApi(res, segments);
    if (first === 'api' && segments.length === 1) return this.discovery(res, 'api', () => this.coreVersions(req));
    if (first === 'api' && segments.length === 2 && second === 'v1')
      return this.discovery(res, 'api/v1', () => this.resourceList('', 'v1'));
    if (first === 'apis' && segments.length === 1) return this.discovery(res, 'apis', () => this.groupList());
    if (first === 'apis' && segments.length === 2) return this.discovery(res, `apis/${second}`, () => this.group(second!));
    if (first === 'apis' && segments.length === 3 && (method === 'GET' || method === 'HEAD')) {
      return this.discovery(res, `apis/${second}/${third}`, () => this.resourceList(second!, third!));
    }
    const target = this.resolve(segments);
    await this.serveResource(req, res, url, method, target, user);
  }

  /** `/openapi/v3` and `/openapi/v3/<api|apis/group>/<version>` (see openapi.ts); no v2. */
  private async openApi(res: ServerResponse, segments: string[]): Promise<void> {
    const [, version, kind, a, b] = segments;
    const registry = this.ctx.state.registry;
    if (version === 'v3' && segments.length === 2) return this.discovery(res, 'openapi/v3', () => openApiRoot(registry));
    if (version === 'v3') {
      const gv = kind === 'api' && segments.length === 4 ? ['', a] : kind === 'apis' && segments.length === 5 ? [a, b] : undefined;
      const doc = gv ? openApiGroupVersionDoc(registry, gv[0] ?? '', gv[1] ?? '') : undefined;
      if (doc) return this.discovery(res, `openapi/v3/${segments.slice(2).join('/')}`, () => doc);
    }
    throw apiError(
      'NotFound',
      `the simulator serves OpenAPI v3 documents of its group-versions only (/openapi/v3), not /${segments.join('/')}`,
    );
  }

  private async discovery(res: ServerResponse, label: string, build: () => unknown): Promise<void> {
    this.ctx.stats.count('discovery', label);
    if (await this.applyFaults(res, 'discovery', 'get')) return;
    sendJson(res, 200, build());
  }

  private coreVersions(req: IncomingMessage): unknown {
    return {
      kind: 'APIVersions',
      versions: ['v1'],
      serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: req.headers.host ?? '127.0.0.1' }],
    };
  }

  private groupDoc(group: string, versions: string[]): Record<string, unknown> {
    const sorted = [...versions].sort(compareKubeVersions);
    return {
      name: group,
      versions: sorted.map((version) => ({ groupVersion: `${group}/${version}`, version })),
      preferredVersion: { groupVersion: `${group}/${sorted[0]}`, version: sorted[0] },
    };
  }

  private groupList(): unknown {
    const groups = [...this.ctx.state.registry.groups().entries()].map(([group, versions]) => this.groupDoc(group, versions));
    return { kind: 'APIGroupList', apiVersion: 'v1', groups };
  }

  private group(group: string): unknown {
    const versions = this.ctx.state.registry.groups().get(group);
    if (!versions) throw apiError('NotFound', `the server could not find the requested resource (group ${group})`);
    return { kind: 'APIGroup', apiVersion: 'v1', ...this.groupDoc(group, versions) };
  }

  private resourceList(group: string, version: string): unknown {
    const types = this.ctx.state.registry.groupVersion(group, version);
    if (!types) throw apiError('NotFound', `the server could not find the requested resource (${group ? `${group}/` : ''}${version})`);
    const resources: unknown[] = [];
    for (const type of types) {
      const entry: Record<string, unknown> = {
        name: type.plural,
        singularName: type.singular,
        namespaced: type.namespaced,
        kind: type.kind,
        verbs: type.createOnly ? ['create'] : standardVerbs,
      };
      if (type.shortNames.length > 0) entry.shortNames = type.shortNames;
      if (type.categories.length > 0) entry.categories = type.categories;
      resources.push(entry);
      if (type.hasStatus)
        resources.push({
          name: `${type.plural}/status`,
          singularName: '',
          namespaced: type.namespaced,
          kind: type.kind,
          verbs: ['get', 'patch', 'update'],
        });
      if (type.kind === 'Pod' && group === '') {
        resources.push({ name: 'pods/exec', singularName: '', namespaced: true, kind: 'PodExecOptions', verbs: ['create', 'get'] });
        resources.push({ name: 'pods/log', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get'] });
      }
      if (type.kind === 'ServiceAccount' && group === '')
        resources.push({
          name: 'serviceaccounts/token',
          singularName: '',
          namespaced: true,
          group: 'authentication.k8s.io',
          version: 'v1',
          kind: 'TokenRequest',
          verbs: ['create'],
        });
    }
    return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: group ? `${group}/${version}` : version, resources };
  }

  /** Maps path segments to a resource type, namespace, name and subresource; throws 404 for anything else. */
  private resolve(segments: string[]): ResourceRequest {
    let rest: string[];
    let group = '';
    let version: string;
    if (segments[0] === 'api' && segments[1] === 'v1') {
      version = 'v1';
      rest = segments.slice(2);
    } else if (segments[0] === 'apis' && segments.length >= 4) {
      group = segments[1]!;
      version = segments[2]!;
      rest = segments.slice(3);
    } else {
      throw apiError('NotFound', 'the server could not find the requested resource');
    }
    let watchPath = false;
    if (rest[0] === 'watch') {
      watchPath = true;
      rest = rest.slice(1);
    }
    let namespace: string | undefined;
    if (rest[0] === 'namespaces' && rest.length >= 3 && !(rest.length === 3 && (rest[2] === 'status' || rest[2] === 'finalize'))) {
      namespace = rest[1]!;
      rest = rest.slice(2);
    }
    if (rest.length === 0 || rest.length > 3) throw apiError('NotFound', 'the server could not find the requested resource');
    const [plural, name, subresource] = rest;
    const type = this.ctx.state.registry.get(group, version, plural!);
    if (!type) throw apiError('NotFound', `the server could not find the requested resource (${group ? `${plural}.${group}` : plural})`);
    if (namespace !== undefined && !type.namespaced) throw apiError('NotFound', 'the server could not find the requested resource');
    if (type.namespaced && namespace === undefined && name !== undefined)
      throw apiError('NotFound', 'the server could not find the requested resource');
    if (subresource !== undefined) {
      const known =
        (subresource === 'status' && type.hasStatus) ||
        (type.kind === 'Pod' && group === '' && (subresource === 'exec' || subresource === 'log')) ||
        (type.kind === 'ServiceAccount' && group === '' && subresource === 'token');
      if (!known) throw apiError('NotFound', 'the server could not find the requested resource');
    }
    return { type, namespace, name, subresource, watchPath };
  }

  private filterFrom(url: URL, type: ResourceType): ObjectFilter {
    return {
      labels: parseLabelSelector(url.searchParams.get('labelSelector') ?? ''),
      fields: parseFieldSelector(url.searchParams.get('fieldSelector') ?? '', type.kind),
    };
  }

  private async serveResource(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    method: string,
    target: ResourceRequest,
    user: UserInfo,
  ): Promise<void> {
    const { type, name, subresource } = target;
    const namespace = target.namespace ?? '';
    const isWatch = target.watchPath || url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
    const label = resourceLabel(type, subresource);
    const verb = this.verbOf(method, name, subresource, isWatch);
    if (verb === 'watch') {
      if (method !== 'GET') throw apiError('MethodNotAllowed', `${method} is not supported for watch`);
      this.ctx.stats.count('watch', label);
      if (await this.applyFaults(res, label, 'watch')) return;
      return this.serveWatch(req, res, url, target);
    }
    this.ctx.stats.count(verb, label);
    if (verb === 'list' && (url.searchParams.get('labelSelector') || url.searchParams.get('fieldSelector')))
      this.ctx.stats.countSelectorList(label);
    if (await this.applyFaults(res, label, verb)) return;
    if (type.createOnly || subresource === 'token') {
      if (verb !== 'create') throw apiError('MethodNotAllowed', 'the server does not allow this method on the requested resource');
      const body = parseBody(await readBody(req), req.headers['content-type'] ?? 'application/json');
      return sendObject(req, res, 201, this.review(type, namespace, name, body, user));
    }
    const dryRun = url.searchParams.getAll('dryRun').includes('All');
    const fieldValidation = fieldValidationOf(url);
    const warnings: string[] = [];
    const writeOptions: Parameters<ClusterState['create']>[3] = { dryRun, warnings, ...(fieldValidation ? { fieldValidation } : {}) };
    if (this.ctx.authz)
      writeOptions.admit = (admittedType, object, previous, admittedSubresource) => {
        checkRbacWrite(this.ctx.security.authorizer, user, admittedType, object, previous, name ?? '');
        admitPodSecurity(this.podSecurity, admittedType, object, previous, admittedSubresource, warnings);
      };
    const warningHeaders = (): Record<string, string> =>
      warnings.length > 0 ? { Warning: warnings.map((w) => `299 - ${JSON.stringify(w)}`).join(', ') } : {};
    const state = this.ctx.state;
    switch (verb) {
      case 'list': {
        const limitText = url.searchParams.get('limit');
        const limit = limitText === null || limitText === '' ? undefined : Number(limitText);
        if (limit !== undefined && (!Number.isInteger(limit) || limit < 0)) throw apiError('BadRequest', `invalid limit: ${limitText}`);
        const options: Parameters<ClusterState['list']>[2] = { filter: this.filterFrom(url, type) };
        if (limit !== undefined) options.limit = limit;
        const token = url.searchParams.get('continue');
        if (token) options.continueToken = token;
        const result = state.list(type, target.namespace, options);
        const metadata: Record<string, unknown> = { resourceVersion: result.resourceVersion };
        if (result.continueToken) metadata.continue = result.continueToken;
        if (result.remainingItemCount !== undefined) metadata.remainingItemCount = result.remainingItemCount;
        const table = this.tableVersion(req, type);
        if (table) return sendJson(res, 200, toTable(type, result.items, metadata, table, url.searchParams.get('includeObject')));
        return sendJson(res, 200, { kind: `${type.kind}List`, apiVersion: apiVersionOf(type), metadata, items: result.items });
      }
      case 'get':
        if (subresource === 'log') {
          state.get(type, namespace, name!);
          res.writeHead(200, { 'Content-Type': 'text/plain' });
          res.end('');
          return;
        }
        {
          const object = state.get(type, namespace, name!);
          const table = subresource === undefined ? this.tableVersion(req, type) : undefined;
          if (table) {
            const metadata = { resourceVersion: object.metadata.resourceVersion };
            return sendJson(res, 200, toTable(type, [object], metadata, table, url.searchParams.get('includeObject')));
          }
          return sendObject(req, res, 200, object);
        }
      case 'create': {
        const body = parseBody(await readBody(req), req.headers['content-type'] ?? 'application/json');
        const created = state.create(type, namespace, body, writeOptions);
        return sendObject(req, res, 201, created, warningHeaders());
      }
      case 'update': {
        const body = parseBody(await readBody(req), req.headers['content-type'] ?? 'application/json');
        const updated = state.update(type, namespace, name!, body, subresource === 'status' ? 'status' : undefined, writeOptions);
        return sendObject(req, res, 200, updated, warningHeaders());
      }
      case 'patch': {
        const contentType = req.headers['content-type'] ?? '';
        const patchType = patchTypeOf(contentType);
        const body = parseBody(await readBody(req), patchType === 'apply' ? 'application/yaml' : 'application/json');
        const existed = state.tryGet(type, namespace, name!) !== undefined;
        const result = state.patch(type, namespace, name!, patchType, body, subresource === 'status' ? 'status' : undefined, writeOptions);
        return sendObject(req, res, existed ? 200 : 201, result, warningHeaders());
      }
      case 'delete': {
        const raw = await readBody(req);
        const options: Parameters<ClusterState['delete']>[3] = { dryRun };
        if (raw.length > 0 && raw.toString('utf8').trim() !== '') {
          const body = parseBody(raw, 'application/json');
          if (isPlainObject(body)) {
            if (isPlainObject(body.preconditions)) {
              if (typeof body.preconditions.resourceVersion === 'string') options.preconditionRv = body.preconditions.resourceVersion;
              if (typeof body.preconditions.uid === 'string') options.preconditionUid = body.preconditions.uid;
            }
            if (Array.isArray(body.dryRun) && body.dryRun.includes('All')) options.dryRun = true;
          }
        }
        return sendObject(req, res, 200, state.delete(type, namespace, name!, options));
      }
      case 'deletecollection': {
        const deleted = state.deleteCollection(type, target.namespace, this.filterFrom(url, type));
        return sendJson(res, 200, {
          kind: `${type.kind}List`,
          apiVersion: apiVersionOf(type),
          metadata: { resourceVersion: String(state.store.resourceVersion) },
          items: deleted,
        });
      }
      case 'connect':
        throw apiError('BadRequest', 'Upgrade request required');
      default:
        throw apiError('MethodNotAllowed', `the server does not allow this method on the requested resource`);
    }
  }

  /** The Table version to answer in (custom resources only; built-ins stay JSON, which kubectl prints itself). */
  private tableVersion(req: IncomingMessage, type: ResourceType): 'v1' | 'v1beta1' | undefined {
    return type.crdName === undefined ? undefined : wantsTable(req.headers.accept);
  }

  /** Answers a create of a review API (or a TokenRequest) from its handler; nothing is stored. */
  private review(type: ResourceType, namespace: string, name: string | undefined, body: unknown, user: UserInfo): unknown {
    const ctx = this.reviewContext(user);
    if (type.kind === 'ServiceAccount') return tokenRequest(ctx, namespace, name!, body);
    switch (type.kind) {
      case 'SelfSubjectAccessReview':
        return selfSubjectAccessReview(ctx, body);
      case 'SubjectAccessReview':
        return subjectAccessReview(ctx, body);
      case 'LocalSubjectAccessReview':
        return localSubjectAccessReview(ctx, namespace, body);
      case 'SelfSubjectRulesReview':
        return selfSubjectRulesReview(ctx, body);
      case 'TokenReview':
        return tokenReview(ctx, body);
      case 'SelfSubjectReview':
        return selfSubjectReview(ctx, body);
      default:
        throw apiError('MethodNotAllowed', 'the server does not allow this method on the requested resource');
    }
  }

  private verbOf(method: string, name: string | undefined, subresource: string | undefined, isWatch: boolean): string {
    if (subresource === 'exec') return 'connect';
    if (subresource === 'token') return method === 'POST' ? 'create' : 'unsupported';
    if (subresource === 'log') return method === 'GET' ? 'get' : 'unsupported';
    switch (method) {
      case 'GET':
      case 'HEAD':
        if (isWatch) return 'watch';
        return name === undefined ? 'list' : 'get';
      case 'POST':
        return name === undefined ? 'create' : 'unsupported';
      case 'PUT':
        return name === undefined ? 'unsupported' : 'update';
      case 'PATCH':
        return name === undefined ? 'unsupported' : 'patch';
      case 'DELETE':
        return name === undefined ? (subresource ? 'unsupported' : 'deletecollection') : subresource ? 'unsupported' : 'delete';
      default:
        return 'unsupported';
    }
  }

  private serveWatch(req: IncomingMessage, res: ServerResponse, url: URL, target: ResourceRequest): void {
    const { type } = target;
    const filter = this.filterFrom(url, type);
    if (target.name !== undefined) filter.fields.push({ field: 'metadata.name', op: '=', value: target.name });
    const rvText = url.searchParams.get('resourceVersion') ?? '';
    let sinceRv: number | undefined;
    if (rvText !== '') {
      sinceRv = Number(rvText);
      if (!Number.isInteger(sinceRv) || sinceRv < 0) throw apiError('BadRequest', `invalid resource version: ${rvText}`);
    }
    if (url.searchParams.get('sendInitialEvents') === 'true') sinceRv = undefined;
    const timeoutText = url.searchParams.get('timeoutSeconds');
    const timeoutSeconds = timeoutText ? Number(timeoutText) : undefined;
    const bookmarks = url.searchParams.get('allowWatchBookmarks') === 'true';
    const label = resourceLabel(type);

    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    // The events of one turn of the event loop go out in one write: in a burst (every request the
    // latency timers release at once) a write per event cost each watcher a syscall per event.
    let pending: string[] = [];
    let flushQueued = false;
    const flush = () => {
      flushQueued = false;
      if (pending.length === 0) return;
      const text = pending.length === 1 ? pending[0]! : pending.join('');
      pending = [];
      if (!res.writableEnded && !res.destroyed) res.write(text);
    };
    // `kubectl get -w` asks for Tables: each event's object is then a one-row Table.
    const table = this.tableVersion(req, type);
    const includeObject = url.searchParams.get('includeObject');
    const write = (event: WatchEvent | { type: 'BOOKMARK'; object: unknown }) => {
      if (res.writableEnded || res.destroyed) return;
      const asTable =
        table && event.type !== 'BOOKMARK' && event.type !== 'ERROR'
          ? { type: event.type, object: toTable(type, [event.object as KubeObject], {}, table, includeObject) }
          : event;
      pending.push(watchLine(asTable));
      if (!flushQueued) {
        flushQueued = true;
        setImmediate(flush);
      }
    };
    const watchClosed = this.ctx.stats.watchOpened(label);
    let unsubscribe: (() => void) | undefined;
    const timers: NodeJS.Timeout[] = [];
    const entry: ActiveWatch = {
      resource: label,
      end: (mode) => {
        cleanup();
        if (mode === 'reset') res.socket?.destroy();
        else if (!res.writableEnded) {
          flush();
          res.end();
        }
      },
    };
    const cleanup = () => {
      unsubscribe?.();
      unsubscribe = undefined;
      for (const timer of timers) clearTimeout(timer);
      this.watches.delete(entry);
      watchClosed();
    };
    this.watches.add(entry);
    res.on('close', cleanup);
    req.on('close', cleanup);

    const subscription = this.ctx.state.watch(type, target.namespace, filter, sinceRv, write);
    if (subscription === 'expired') {
      const oldest = this.ctx.state.store.oldestResumableRv;
      write({ type: 'ERROR', object: failureStatus('Expired', `too old resource version: ${rvText} (${oldest})`) });
      entry.end('end');
      return;
    }
    unsubscribe = subscription;
    const bookmark = () => ({
      type: 'BOOKMARK' as const,
      object: {
        kind: type.kind,
        apiVersion: apiVersionOf(type),
        metadata: { resourceVersion: String(this.ctx.state.store.resourceVersion) },
      },
    });
    if (url.searchParams.get('sendInitialEvents') === 'true' && bookmarks) {
      const initialEnd = bookmark();
      (initialEnd.object.metadata as Record<string, unknown>).annotations = { 'k8s.io/initial-events-end': 'true' };
      write(initialEnd);
    }
    if (bookmarks && this.ctx.bookmarkIntervalMs > 0) {
      const interval = setInterval(() => write(bookmark()), this.ctx.bookmarkIntervalMs);
      timers.push(interval as unknown as NodeJS.Timeout);
      res.on('close', () => clearInterval(interval));
    }
    if (timeoutSeconds !== undefined && Number.isFinite(timeoutSeconds) && timeoutSeconds > 0) {
      timers.push(setTimeout(() => entry.end('end'), timeoutSeconds * 1000));
    }
  }

  /** Handles `Upgrade: websocket` requests: pod exec only. */
  async handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, url: URL): Promise<void> {
    const reject = (status: KubeStatus, headers: Record<string, string> = {}) => {
      const body = JSON.stringify(status);
      const extra = Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      socket.end(
        `HTTP/1.1 ${status.code} ${status.reason ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`,
      );
    };
    socket.on('error', () => socket.destroy());
    try {
      const segments = pathSegments(url);
      // kube-apiserver authorizes the upgrade (a GET) as `get` on pods/exec; 1.35 (feature
      // AuthorizePodWebsocketUpgradeCreatePermission, on by default) also asks for `create`, as an
      // SPDY exec (a POST) always did. The simulator asks for both.
      this.admit(req, url, segments, ['create']);
      const target = this.resolve(segments);
      if (target.subresource !== 'exec' || target.name === undefined)
        throw apiError('BadRequest', 'only pods/exec accepts WebSocket connections');
      const label = resourceLabel(target.type, 'exec');
      this.ctx.stats.count('create', label);
      const fault = await this.applyFaults(undefined, label, 'create');
      if (fault) {
        const { body, headers } = this.faultAnswer(fault);
        reject(body, headers);
        return;
      }
      const namespace = target.namespace ?? '';
      const pod = this.ctx.state.tryGet(target.type, namespace, target.name);
      if (!pod) throw notFound('pods', '', target.name);
      const command = url.searchParams.getAll('command');
      if (command.length === 0) throw apiError('BadRequest', 'you must specify at least 1 command');
      const containers = containerNames(pod);
      let container = url.searchParams.get('container') ?? '';
      // An exec refused once the pod and command are known is logged too, with why.
      const refuse = (message: string): never => {
        this.ctx.execLog.refuse({ namespace, pod: target.name!, container, command, refused: message });
        throw apiError('BadRequest', message);
      };
      if (container === '') {
        if (containers.length !== 1)
          refuse(`a container name must be specified for pod ${target.name}, choose one of: [${containers.join(' ')}]`);
        container = containers[0]!;
      }
      if (!containers.includes(container)) refuse(`container ${container} is not valid for pod ${target.name}`);
      const phase = isPlainObject(pod.status) ? pod.status.phase : undefined;
      if (phase === 'Succeeded' || phase === 'Failed')
        refuse(`cannot exec into a container in a completed pod; current phase is ${String(phase)}`);
      if (phase !== 'Running') refuse(`unable to upgrade connection: pod ${target.name} is not running (phase ${String(phase)})`);
      const wants = (param: string) => ['1', 'true'].includes(url.searchParams.get(param) ?? '');
      const outcome = resolveExecOutcome(
        this.behaviourFor(pod, namespace, target.name, container),
        command,
        this.execRuleUses,
        `${namespace}/${target.name}/${container}`,
      );
      this.execServer.handleUpgrade(req, socket, head, (ws) => {
        this.runExec(ws, { namespace, pod: target.name!, container, command, outcome, stdout: wants('stdout'), stderr: wants('stderr') });
      });
    } catch (error) {
      if (error instanceof ApiError) reject(error.status, error.headers);
      else reject(failureStatus('InternalError', `internal error: ${(error as Error)?.message ?? String(error)}`));
    }
  }

  /** How often each exec rule with `times` answered, per container (see resolveExecOutcome). */
  private readonly execRuleUses = new Map<string, number>();

  private behaviourFor(pod: KubeObject, namespace: string, name: string, container: string) {
    const { behaviour, invalidAnnotation } = containerBehaviour(
      pod.metadata.annotations,
      this.ctx.execOverrides.get(`${namespace}/${name}`),
      container,
    );
    if (invalidAnnotation) this.ctx.warn(`pod ${namespace}/${name}: ignoring invalid sim.stowage.dev/exec annotation`);
    return behaviour;
  }

  private runExec(
    ws: WebSocket,
    run: {
      namespace: string;
      pod: string;
      container: string;
      command: string[];
      outcome: ReturnType<typeof resolveExecOutcome>;
      stdout: boolean;
      stderr: boolean;
    },
  ): void {
    this.openExecSockets.add(ws);
    const record = this.ctx.execLog.start({
      namespace: run.namespace,
      pod: run.pod,
      container: run.container,
      command: run.command,
      startedAt: new Date().toISOString(),
      protocol: ws.protocol,
    });
    let finished = false;
    const frame = (channel: number, data: string | Buffer) =>
      Buffer.concat([Buffer.from([channel]), Buffer.isBuffer(data) ? data : Buffer.from(data, 'utf8')]);
    const finish = () => {
      finished = true;
      record.endedAt = new Date().toISOString();
      record.exitCode = run.outcome.exitCode;
      if (run.stdout && run.outcome.stdout) ws.send(frame(1, run.outcome.stdout));
      if (run.stderr && run.outcome.stderr) ws.send(frame(2, run.outcome.stderr));
      const status =
        run.outcome.exitCode === 0
          ? { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' }
          : {
              kind: 'Status',
              apiVersion: 'v1',
              metadata: {},
              status: 'Failure',
              message: `command terminated with non-zero exit code: error executing command [${run.command.join(' ')}], exit code ${run.outcome.exitCode}`,
              reason: 'NonZeroExitCode',
              details: { causes: [{ reason: 'ExitCode', message: String(run.outcome.exitCode) }] },
            };
      ws.send(frame(3, JSON.stringify(status)));
      ws.close(1000);
    };
    let timer: NodeJS.Timeout | undefined;
    const unhold = run.outcome.hold
      ? this.ctx.heldExecs.hold(run.namespace, run.pod, () => {
          timer = setTimeout(finish, run.outcome.durationMs);
        })
      : undefined;
    if (!unhold) timer = setTimeout(finish, run.outcome.durationMs);
    ws.on('message', () => {
      // stdin and resize frames are accepted and ignored: the scripted command does not read them.
    });
    ws.on('error', () => ws.terminate());
    ws.on('close', () => {
      this.openExecSockets.delete(ws);
      unhold?.();
      if (finished) return;
      clearTimeout(timer);
      record.endedAt = new Date().toISOString();
      record.aborted = true;
    });
  }
}

export function containerNames(pod: KubeObject): string[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const names: string[] = [];
  for (const listName of ['containers', 'initContainers', 'ephemeralContainers']) {
    const list = spec[listName];
    if (Array.isArray(list)) for (const c of list) if (isPlainObject(c) && typeof c.name === 'string') names.push(c.name);
  }
  return names;
}

export function sendApiStatus(res: ServerResponse, status: KubeStatus): void {
  sendStatus(res, status);
}

/** Path segments, percent-decoded; a malformed escape is the client's error (400), not ours. */
/** The request's `fieldValidation` directive (Ignore, Warn, Strict), or undefined when absent. */
function fieldValidationOf(url: URL): 'Ignore' | 'Warn' | 'Strict' | undefined {
  const value = url.searchParams.get('fieldValidation');
  if (value === null || value === '') return undefined;
  if (value === 'Ignore' || value === 'Warn' || value === 'Strict') return value;
  throw apiError('BadRequest', `fieldValidation must be one of Ignore, Warn, Strict (got ${JSON.stringify(value)})`);
}

export function pathSegments(url: URL): string[] {
  return url.pathname
    .split('/')
    .filter((s) => s !== '')
    .map((segment) => {
      try {
        return decodeURIComponent(segment);
      } catch {
        throw apiError('BadRequest', `malformed percent-encoding in path segment "${segment}"`);
      }
    });
}
