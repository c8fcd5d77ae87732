/**
 * The API server's front door: authentication (bearer tokens), impersonation, and the RBAC check
 * of every request, answering 401/403 `Status` bodies as kube-apiserver does.
 */
import type { IncomingMessage } from 'node:http';
import { apiError, forbidden } from '../api-status.js';
import type { ClusterState } from '../cluster-state.js';
import { RbacAuthorizer } from './authorizer.js';
import {
  allAuthenticated,
  allUnauthenticated,
  anonymous,
  anonymousUser,
  parseServiceAccountUsername,
  serviceAccountGroups,
  systemMasters,
  type UserInfo,
} from './identity.js';
import { type RequestAttributes, resourceAttributes } from './rbac-rules.js';
import { type BoundObject, TokenAuthority } from './tokens.js';

/** Paths an anonymous request may reach (everything else without credentials is 401). */
const anonymousPaths = new Set(['/version', '/version/', '/healthz', '/livez', '/readyz']);
const websocketTokenProtocol = 'base64url.bearer.authorization.k8s.io.';

export interface Decision {
  allowed: boolean;
  reason: string;
}

/** kube-apiserver's words for a denied request: `User "x" cannot create resource "pods" in API group "" in the namespace "shop"`. */
export function forbiddenMessage(user: UserInfo, request: RequestAttributes): string {
  const who = `User ${JSON.stringify(user.name)}`;
  if (!request.resourceRequest) return `${who} cannot ${request.verb} path ${JSON.stringify(request.path)}`;
  const resource = request.subresource ? `${request.resource}/${request.subresource}` : request.resource;
  const scope = request.namespace ? `in the namespace ${JSON.stringify(request.namespace)}` : 'at the cluster scope';
  return `${who} cannot ${request.verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(request.apiGroup)} ${scope}`;
}

export function forbiddenError(user: UserInfo, request: RequestAttributes, reason = '') {
  const why = reason ? `${forbiddenMessage(user, request)}: ${reason}` : forbiddenMessage(user, request);
  return request.resourceRequest ? forbidden(request.resource, request.apiGroup, request.name, why) : forbidden('', '', '', why);
}

export class Security {
  readonly tokens: TokenAuthority;
  readonly authorizer: RbacAuthorizer;

  constructor(
    private readonly state: ClusterState,
    nowSeconds: () => number = () => Math.floor(Date.now() / 1000),
  ) {
    this.authorizer = new RbacAuthorizer(state.store);
    this.tokens = new TokenAuthority({
      nowSeconds,
      serviceAccountUid: (namespace, name) => state.store.get('serviceaccounts', namespace, name)?.metadata.uid,
      boundObjectUid: (namespace, bound: BoundObject) => {
        if (bound.kind === 'Pod') return state.store.get('pods', namespace, bound.name)?.metadata.uid;
        if (bound.kind === 'Secret') return state.store.get('secrets', namespace, bound.name)?.metadata.uid;
        return state.store.get('nodes', '', bound.name)?.metadata.uid;
      },
    });
  }

  /** The requester: the token's identity, anonymous for the few public paths, else a 401. */
  authenticate(req: IncomingMessage, path: string): UserInfo {
    const token = bearerToken(req);
    if (token === undefined) {
      if (anonymousPaths.has(path)) return anonymous;
      throw apiError('Unauthorized', 'Unauthorized');
    }
    const checked = this.tokens.check(token);
    if (!checked.ok) throw apiError('Unauthorized', 'Unauthorized');
    return checked.user;
  }

  authorize(user: UserInfo, request: RequestAttributes): Decision {
    return this.authorizer.authorize(user, request);
  }

  /** Throws kube-apiserver's 403 when `user` may not do `request`. */
  require(user: UserInfo, request: RequestAttributes): void {
    const decision = this.authorizer.authorize(user, request);
    if (!decision.allowed) throw forbiddenError(user, request, decision.reason);
  }

  /**
   * Applies `Impersonate-User`/`-Group`/`-Uid`/`-Extra-*` headers: each asks the requester for the
   * `impersonate` verb on users (or the service account), groups, uids and userextras; the result is
   * the impersonated identity (with `system:authenticated`, and a service account's groups when no
   * group is given).
   */
  impersonate(req: IncomingMessage, requester: UserInfo): UserInfo {
    const headers = req.headersDistinct;
    const users = headers['impersonate-user'] ?? [];
    const groups = headers['impersonate-group'] ?? [];
    const uids = headers['impersonate-uid'] ?? [];
    const extras: [string, string[]][] = [];
    for (const [header, values] of Object.entries(headers)) {
      if (!header.startsWith('impersonate-extra-') || !values) continue;
      let key = header.slice('impersonate-extra-'.length);
      try {
        key = decodeURIComponent(key);
      } catch {
        throw apiError('BadRequest', `malformed impersonation extra key ${JSON.stringify(key)}`);
      }
      extras.push([key, values]);
    }
    if (users.length === 0) {
      if (groups.length > 0 || uids.length > 0 || extras.length > 0)
        throw apiError('BadRequest', 'requested impersonation of groups, uid or extra without impersonating a user');
      return requester;
    }
    const username = users[0]!;
    const checks: RequestAttributes[] = [];
    const sa = parseServiceAccountUsername(username);
    if (sa)
      checks.push(
        resourceAttributes('impersonate', { resource: 'serviceaccounts', namespace: sa.namespace, name: sa.name, apiVersion: 'v1' }),
      );
    else checks.push(resourceAttributes('impersonate', { resource: 'users', name: username, apiVersion: 'v1' }));
    for (const group of groups) checks.push(resourceAttributes('impersonate', { resource: 'groups', name: group, apiVersion: 'v1' }));
    for (const uid of uids.slice(0, 1))
      checks.push(resourceAttributes('impersonate', { apiGroup: 'authentication.k8s.io', apiVersion: 'v1', resource: 'uids', name: uid }));
    for (const [key, values] of extras)
      for (const value of values)
        checks.push(
          resourceAttributes('impersonate', {
            apiGroup: 'authentication.k8s.io',
            apiVersion: 'v1',
            resource: 'userextras',
            subresource: key,
            name: value,
          }),
        );
    for (const check of checks) this.require(requester, check);
    const impersonated: UserInfo = { name: username, groups: groups.length === 0 && sa ? serviceAccountGroups(sa.namespace) : [...groups] };
    if (uids[0]) impersonated.uid = uids[0];
    if (extras.length > 0) impersonated.extra = Object.fromEntries(extras);
    const implied = username === anonymousUser ? allUnauthenticated : allAuthenticated;
    if (!impersonated.groups.includes(implied)) impersonated.groups.push(implied);
    return impersonated;
  }

  isPrivileged(user: UserInfo): boolean {
    return user.groups.includes(systemMasters);
  }

  /** The uid of a live ServiceAccount (TokenRequest's 404 when absent). */
  serviceAccountUid(namespace: string, name: string): string | undefined {
    return this.state.store.get('serviceaccounts', namespace, name)?.metadata.uid;
  }
}

/** `Authorization: Bearer <token>` (the scheme case-insensitive), or the WebSocket subprotocol kubectl may send instead. */
export function bearerToken(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  if (typeof header === 'string') {
    const space = header.indexOf(' ');
    // Another scheme, or an empty token, is no credential: the request is anonymous (as kube-apiserver's bearer authenticator).
    if (space > 0 && header.slice(0, space).toLowerCase() === 'bearer') {
      const token = header.slice(space + 1).trim();
      if (token !== '') return token;
    }
  }
  const protocols = req.headers['sec-websocket-protocol'];
  if (typeof protocols === 'string')
    for (const protocol of protocols.split(',')) {
      const trimmed = protocol.trim();
      if (trimmed.startsWith(websocketTokenProtocol)) {
        try {
          return Buffer.from(trimmed.slice(websocketTokenProtocol.length), 'base64url').toString('utf8');
        } catch {
          return '';
        }
      }
    }
  return undefined;
}
