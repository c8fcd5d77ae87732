/*
 * Asking the API server who a token belongs to (TokenReview) and what an identity may do
 * (SubjectAccessReview), for acting on behalf of a requester: the API authenticates a user's
 * Kubernetes token with it, and Stowage checks the requester's rights before it uses its own (a
 * spec hook's exec, a restore into a mapped namespace). Answers are cached briefly (bounded in
 * entries and time) so a page of a list or a block of hooks costs one review per distinct
 * question, and a revoked RoleBinding or token takes effect within the TTL.
 */
import { LRUCache } from 'lru-cache';
import type { KubeClients } from './kube-clients.js';

/** An authenticated identity, as TokenReview's `status.user` names it. */
export interface ReviewedUser {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

/** A SubjectAccessReview's `resourceAttributes` (Kubernetes' names). */
export interface ReviewAttributes {
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  /** Absent: cluster-scoped (or every namespace for a list). */
  namespace?: string;
  name?: string;
}

export interface AccessDecision {
  allowed: boolean;
  /** The authorizer's reason or evaluation error, when it gave one. */
  reason?: string;
}

export interface AccessReviewer {
  /** The token's user, or undefined when the API server does not authenticate it. */
  authenticate(token: string): Promise<ReviewedUser | undefined>;
  /** Whether `user` may do `attrs` (a SubjectAccessReview as that user). */
  review(user: ReviewedUser, attrs: ReviewAttributes): Promise<AccessDecision>;
}

export interface AccessReviewerOptions {
  /** How long an answer is reused; default 10 s (a revoked right stops working within it). */
  ttlMs?: number;
  /** Cached answers at most, per kind (tokens, decisions); default 10 000. */
  maxEntries?: number;
  /** TokenReview audiences; default none (the API server's own). */
  audiences?: string[];
}

interface TokenReviewStatus {
  status?: { authenticated?: boolean; user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> } };
}

interface SubjectAccessReviewStatus {
  status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
}

const AUTHENTICATION_PATH = '/apis/authentication.k8s.io/v1/tokenreviews';
const AUTHORIZATION_PATH = '/apis/authorization.k8s.io/v1/subjectaccessreviews';

/**
 * A reviewer over `kube` (whose identity needs `create tokenreviews` and `create
 * subjectaccessreviews`: Kubernetes' `system:auth-delegator`). Errors of the API server are
 * thrown (the caller refuses; an unanswered review never allows).
 */
export function createAccessReviewer(kube: Pick<KubeClients, 'requestJson'>, options: AccessReviewerOptions = {}): AccessReviewer {
  const ttl = options.ttlMs ?? 10_000;
  const max = options.maxEntries ?? 10_000;
  // Tokens are cached under their value only in memory, as the API server's own token cache does.
  const tokens = new LRUCache<string, { user: ReviewedUser | null }>({ max, ttl });
  const decisions = new LRUCache<string, AccessDecision>({ max, ttl });
  const inFlight = new Map<string, Promise<unknown>>();
  const once = <T>(key: string, fn: () => Promise<T>): Promise<T> => {
    const pending = inFlight.get(key) as Promise<T> | undefined;
    if (pending) return pending;
    const p = fn().finally(() => inFlight.delete(key));
    inFlight.set(key, p);
    return p;
  };

  return {
    async authenticate(token) {
      const cached = tokens.get(token);
      if (cached) return cached.user ?? undefined;
      return once(`t\0${token}`, async () => {
        const res = await kube.requestJson<TokenReviewStatus>({
          method: 'POST',
          path: AUTHENTICATION_PATH,
          body: {
            apiVersion: 'authentication.k8s.io/v1',
            kind: 'TokenReview',
            spec: { token, ...(options.audiences ? { audiences: options.audiences } : {}) },
          },
          description: 'TokenReview of a bearer token',
        });
        const u = res.status?.user;
        const user: ReviewedUser | null =
          res.status?.authenticated === true && u?.username
            ? {
                username: u.username,
                ...(u.uid ? { uid: u.uid } : {}),
                groups: u.groups ?? [],
                ...(u.extra && Object.keys(u.extra).length > 0 ? { extra: u.extra } : {}),
              }
            : null;
        tokens.set(token, { user });
        return user ?? undefined;
      });
    },

    async review(user, attrs) {
      const key = JSON.stringify([user.username, user.uid ?? '', [...user.groups].sort(), attrs]);
      const cached = decisions.get(key);
      if (cached) return cached;
      return once(`d\0${key}`, async () => {
        const res = await kube.requestJson<SubjectAccessReviewStatus>({
          method: 'POST',
          path: AUTHORIZATION_PATH,
          body: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SubjectAccessReview',
            spec: {
              user: user.username,
              ...(user.uid ? { uid: user.uid } : {}),
              groups: user.groups,
              ...(user.extra ? { extra: user.extra } : {}),
              resourceAttributes: attrs,
            },
          },
          description: `SubjectAccessReview: may ${user.username} ${attrs.verb} ${attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource}`,
        });
        const s = res.status ?? {};
        const reason = s.reason || s.evaluationError;
        const decision: AccessDecision = { allowed: s.allowed === true && s.denied !== true, ...(reason ? { reason } : {}) };
        decisions.set(key, decision);
        return decision;
      });
    },
  };
}
