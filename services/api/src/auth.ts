import { createHash, timingSafeEqual } from 'node:crypto';
import type { AccessReviewer } from '@stowage/kube';

/**
 * How the API authenticates: bearer tokens, or (only when asked for explicitly) nothing. `tokens`
 * are static (each a cluster-admin equivalent); with `kube`, any other bearer token is a user's
 * Kubernetes token, authenticated by TokenReview and authorized per request by SubjectAccessReview
 * on `stowage.dev` resources (docs/tenancy.md).
 */
export type AuthMode = { mode: 'tokens'; tokens: readonly string[]; kube?: AccessReviewer | undefined } | { mode: 'disabled' };

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();

/**
 * Returns a function that tells whether a presented token is one of `tokens`. Comparison is on
 * SHA-256 digests (equal length by construction) with `timingSafeEqual`, and every configured
 * token is compared, so timing tells nothing about which token or how much of it matched.
 */
export function createTokenVerifier(tokens: readonly string[]): (presented: string) => boolean {
  const digests = tokens.map(digest);
  return (presented) => {
    const candidate = digest(presented);
    let match = false;
    for (const d of digests) {
      if (timingSafeEqual(candidate, d)) match = true;
    }
    return match;
  };
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return m?.[1];
}

/** Query parameters that look like credentials; a request carrying one is refused. */
export const QUERY_TOKEN_PARAMS = ['token', 'access_token', 'api_key', 'apikey', 'auth', 'authorization', 'bearer'] as const;

/** The URL with the values of credential-like query parameters replaced, for logs. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  let changed = false;
  for (const key of [...params.keys()]) {
    if ((QUERY_TOKEN_PARAMS as readonly string[]).includes(key.toLowerCase())) {
      params.set(key, '[Redacted]');
      changed = true;
    }
  }
  return changed ? `${url.slice(0, q)}?${params.toString()}` : url;
}
