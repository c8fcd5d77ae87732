/**
 * Bearer tokens: static ones (the admin's, `addUser`'s, like a token-auth file) and service-account
 * tokens minted by TokenRequest. A service-account token is a JWT signed with HMAC-SHA256 under a
 * secret made at start, so nobody outside the simulator can forge one; it names the account's uid,
 * so it dies with the account (a recreated account of the same name has a new uid), and it expires.
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { allAuthenticated, serviceAccountGroups, serviceAccountUsername, type UserInfo } from './identity.js';

/** The audience of the simulated API server: tokens for it (the default of TokenRequest) authenticate requests. */
export const apiServerAudience = 'https://kubernetes.default.svc.cluster.local';
export const tokenIssuer = 'https://kubernetes.default.svc.cluster.local';

export interface BoundObject {
  kind: 'Pod' | 'Secret' | 'Node';
  name: string;
  uid: string;
}

export interface ServiceAccountClaims {
  namespace: string;
  name: string;
  /** The account's uid when the token was minted. */
  uid: string;
  audiences: string[];
  /** Unix seconds. */
  issuedAt: number;
  expiresAt: number;
  /** Token id (JWT `jti`): the credential id in the user's extra, as the API server reports it. */
  id: string;
  boundObject?: BoundObject;
}

export type TokenCheck =
  | { ok: true; user: UserInfo; audiences: string[] }
  | { ok: false; why: 'malformed' | 'unknown' | 'expired' | 'revoked' | 'audience' };

export interface TokenLookups {
  /** The uid of a live ServiceAccount, undefined when it does not exist. */
  serviceAccountUid(namespace: string, name: string): string | undefined;
  /** The uid of a live object a token is bound to (Pod, Secret in the account's namespace; Node), or undefined. */
  boundObjectUid(namespace: string, bound: BoundObject): string | undefined;
  /** Seconds since the epoch. */
  nowSeconds(): number;
}

const header = Buffer.from(JSON.stringify({ alg: 'HS256', kid: 'stowage-sim', typ: 'JWT' })).toString('base64url');
/** Verified signatures kept, so a token used for thousands of requests is checked once (bounded). */
const verifiedLimit = 10_000;

export class TokenAuthority {
  private readonly secret = randomBytes(32);
  private readonly staticTokens = new Map<string, UserInfo>();
  private readonly verified = new Map<string, ServiceAccountClaims>();

  constructor(private readonly lookups: TokenLookups) {}

  /** Registers a static token for `user` and returns it (a new random one unless given). */
  addStatic(user: UserInfo, token = randomBytes(24).toString('base64url')): string {
    this.staticTokens.set(token, { ...user, groups: [...user.groups] });
    return token;
  }

  /** A signed token for the service account (its uid now), valid `expirationSeconds` from now. */
  mintServiceAccountToken(options: {
    namespace: string;
    name: string;
    uid: string;
    expirationSeconds: number;
    audiences: string[];
    boundObject?: BoundObject;
  }): { token: string; claims: ServiceAccountClaims } {
    const now = this.lookups.nowSeconds();
    const claims: ServiceAccountClaims = {
      namespace: options.namespace,
      name: options.name,
      uid: options.uid,
      audiences: options.audiences,
      issuedAt: now,
      expiresAt: now + options.expirationSeconds,
      id: randomUUID(),
    };
    if (options.boundObject) claims.boundObject = options.boundObject;
    const kubernetesClaim: Record<string, unknown> = {
      namespace: claims.namespace,
      serviceaccount: { name: claims.name, uid: claims.uid },
    };
    if (claims.boundObject)
      kubernetesClaim[claims.boundObject.kind.toLowerCase()] = { name: claims.boundObject.name, uid: claims.boundObject.uid };
    const payload = Buffer.from(
      JSON.stringify({
        aud: claims.audiences,
        exp: claims.expiresAt,
        iat: claims.issuedAt,
        iss: tokenIssuer,
        jti: claims.id,
        'kubernetes.io': kubernetesClaim,
        nbf: claims.issuedAt,
        sub: serviceAccountUsername(claims.namespace, claims.name),
      }),
    ).toString('base64url');
    const signed = `${header}.${payload}`;
    return { token: `${signed}.${this.sign(signed)}`, claims };
  }

  /**
   * Who `token` is, for a request to the API server (`audiences` = its own) or a TokenReview's
   * audiences. Cheap for a token seen before: its signature is verified once, its expiry and
   * account (and bound object) are checked every time.
   */
  check(token: string, audiences: string[] = [apiServerAudience]): TokenCheck {
    const user = this.staticTokens.get(token);
    if (user) return { ok: true, user, audiences };
    let claims = this.verified.get(token);
    if (!claims) {
      const parsed = this.verify(token);
      if (!parsed.ok) return parsed;
      claims = parsed.claims;
      if (this.verified.size >= verifiedLimit) this.verified.clear();
      this.verified.set(token, claims);
    }
    if (claims.expiresAt <= this.lookups.nowSeconds()) return { ok: false, why: 'expired' };
    if (this.lookups.serviceAccountUid(claims.namespace, claims.name) !== claims.uid) return { ok: false, why: 'revoked' };
    if (claims.boundObject && this.lookups.boundObjectUid(claims.namespace, claims.boundObject) !== claims.boundObject.uid)
      return { ok: false, why: 'revoked' };
    const accepted = claims.audiences.filter((audience) => audiences.includes(audience));
    if (accepted.length === 0) return { ok: false, why: 'audience' };
    const extra: Record<string, string[]> = { 'authentication.kubernetes.io/credential-id': [`JTI=${claims.id}`] };
    if (claims.boundObject?.kind === 'Pod') {
      extra['authentication.kubernetes.io/pod-name'] = [claims.boundObject.name];
      extra['authentication.kubernetes.io/pod-uid'] = [claims.boundObject.uid];
    }
    return {
      ok: true,
      user: {
        name: serviceAccountUsername(claims.namespace, claims.name),
        uid: claims.uid,
        groups: [...serviceAccountGroups(claims.namespace), allAuthenticated],
        extra,
      },
      audiences: accepted,
    };
  }

  private sign(text: string): string {
    return createHmac('sha256', this.secret).update(text).digest('base64url');
  }

  private verify(token: string): { ok: true; claims: ServiceAccountClaims } | { ok: false; why: 'malformed' | 'unknown' } {
    // Bounded before any work: a flood of huge or odd strings costs a length check each.
    if (token.length > 8192) return { ok: false, why: 'malformed' };
    const parts = token.split('.');
    if (parts.length !== 3) return { ok: false, why: token.includes('.') ? 'malformed' : 'unknown' };
    const [head, payload, signature] = parts as [string, string, string];
    const expected = Buffer.from(this.sign(`${head}.${payload}`));
    const given = Buffer.from(signature);
    if (head !== header || given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, why: 'unknown' };
    try {
      const body = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
      const kube = body['kubernetes.io'] as { namespace: string; serviceaccount: { name: string; uid: string } } & Record<string, unknown>;
      const claims: ServiceAccountClaims = {
        namespace: kube.namespace,
        name: kube.serviceaccount.name,
        uid: kube.serviceaccount.uid,
        audiences: body.aud as string[],
        issuedAt: body.iat as number,
        expiresAt: body.exp as number,
        id: body.jti as string,
      };
      for (const kind of ['Pod', 'Secret', 'Node'] as const) {
        const bound = kube[kind.toLowerCase()] as { name: string; uid: string } | undefined;
        if (bound) claims.boundObject = { kind, name: bound.name, uid: bound.uid };
      }
      return { ok: true, claims };
    } catch {
      return { ok: false, why: 'malformed' };
    }
  }
}

/** The reason a TokenReview reports for a token that does not authenticate. */
export function tokenFailureMessage(why: Exclude<TokenCheck, { ok: true }>['why']): string {
  switch (why) {
    case 'expired':
      return '[invalid bearer token, service account token has expired]';
    case 'revoked':
      return '[invalid bearer token, service account token has been invalidated]';
    case 'audience':
      return '[invalid bearer token, token audiences is invalid]';
    case 'malformed':
      return '[invalid bearer token, token is malformed]';
    default:
      return '[invalid bearer token, token lookup failed]';
  }
}
