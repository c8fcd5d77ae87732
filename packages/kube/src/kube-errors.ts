import { ApiException } from '@kubernetes/client-node';

/** Every error code this package throws, in one catalogue. */
export const KubeErrorCodes = {
  /** 404: the object or resource does not exist. */
  notFound: 'KUBE_NOT_FOUND',
  /** 409 AlreadyExists on create. */
  alreadyExists: 'KUBE_ALREADY_EXISTS',
  /** 409 Conflict: a stale resourceVersion or a concurrent writer. */
  conflict: 'KUBE_CONFLICT',
  /** 422 Invalid or 400 BadRequest: the server rejected what we sent. */
  invalid: 'KUBE_INVALID',
  /** 401: no or bad credentials. */
  unauthorized: 'KUBE_UNAUTHORIZED',
  /** 403: RBAC says no. */
  forbidden: 'KUBE_FORBIDDEN',
  /** 410 Expired/Gone: a continue token or watch resourceVersion is too old. */
  expired: 'KUBE_EXPIRED',
  /** 429/5xx or a connection error that outlived every retry. */
  unavailable: 'KUBE_UNAVAILABLE',
  /** The kubeconfig could not be loaded or has no current cluster. */
  configInvalid: 'KUBE_CONFIG_INVALID',
  /** A caller passed arguments this package cannot use. */
  badArgument: 'KUBE_BAD_ARGUMENT',
  /** Anything else the server answered, or a response we could not parse. */
  unexpected: 'KUBE_UNEXPECTED',
} as const;

export type KubeErrorCode = (typeof KubeErrorCodes)[keyof typeof KubeErrorCodes];

export interface KubeErrorInit {
  code: KubeErrorCode;
  message: string;
  /** HTTP status, 0 when the request never got an answer. */
  status?: number;
  /** Kubernetes Status reason (`NotFound`, `AlreadyExists`, `Conflict`, ...). */
  reason?: string;
  cause?: unknown;
}

export class KubeError extends Error {
  readonly code: KubeErrorCode;
  readonly status: number;
  readonly reason: string;

  constructor(init: KubeErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'KubeError';
    this.code = init.code;
    this.status = init.status ?? 0;
    this.reason = init.reason ?? '';
  }
}

export function isKubeError(err: unknown, code?: KubeErrorCode): err is KubeError {
  return err instanceof KubeError && (code === undefined || err.code === code);
}

/** Node/undici/node-fetch error codes that mean "the request did not get an answer". */
const connectionErrorCodes = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
  // node-fetch 2: the server cut a (watch) body short.
  'ERR_STREAM_PREMATURE_CLOSE',
]);

/** True for errors that never reached a server answer: connection refused/reset, hang-ups, request timeouts. */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const withCodes = err as Error & { code?: unknown; errno?: unknown; type?: unknown };
  if (typeof withCodes.code === 'string' && connectionErrorCodes.has(withCodes.code)) return true;
  if (typeof withCodes.errno === 'string' && connectionErrorCodes.has(withCodes.errno)) return true;
  // node-fetch aborts (our per-request timeout) and "socket hang up" have no useful code.
  if (err.name === 'AbortError' || withCodes.type === 'aborted' || withCodes.type === 'request-timeout') return true;
  if (/socket hang up|ECONNRESET|ECONNREFUSED|other side closed/i.test(err.message)) return true;
  return err.cause !== undefined && err.cause !== err && isConnectionError(err.cause);
}

interface StatusBody {
  kind?: string;
  message?: string;
  reason?: string;
  code?: number;
}

/** ApiException.body is the raw response text (a JSON Status when the server is Kubernetes). */
export function parseStatusBody(body: unknown): StatusBody {
  if (body && typeof body === 'object') return body as StatusBody;
  if (typeof body !== 'string' || body.length === 0) return {};
  try {
    const parsed: unknown = JSON.parse(body);
    return parsed && typeof parsed === 'object' ? (parsed as StatusBody) : {};
  } catch {
    return { message: body.slice(0, 500) };
  }
}

/** The code for an HTTP answer; `reason` separates AlreadyExists from Conflict on 409. */
export function codeForStatus(status: number, reason: string): KubeErrorCode {
  switch (status) {
    case 400:
    case 422:
      return KubeErrorCodes.invalid;
    case 401:
      return KubeErrorCodes.unauthorized;
    case 403:
      return KubeErrorCodes.forbidden;
    case 404:
      return KubeErrorCodes.notFound;
    case 409:
      return reason === 'AlreadyExists' ? KubeErrorCodes.alreadyExists : KubeErrorCodes.conflict;
    case 410:
      return KubeErrorCodes.expired;
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      return KubeErrorCodes.unavailable;
    default:
      return KubeErrorCodes.unexpected;
  }
}

/** Builds a KubeError from an HTTP status and a response body (text or parsed). */
export function kubeErrorFromResponse(status: number, body: unknown, context: string, cause?: unknown): KubeError {
  const parsed = parseStatusBody(body);
  const reason = typeof parsed.reason === 'string' ? parsed.reason : '';
  const serverMessage = typeof parsed.message === 'string' && parsed.message.length > 0 ? parsed.message : `HTTP ${status}`;
  return new KubeError({
    code: codeForStatus(status, reason),
    status,
    reason,
    message: `${context}: ${serverMessage}`,
    cause,
  });
}

/**
 * The one place where client-node failures become KubeErrors: ApiException (status + Status body),
 * connection errors (KUBE_UNAVAILABLE, status 0), and anything else (KUBE_UNEXPECTED).
 * A KubeError passes through unchanged.
 */
export function toKubeError(err: unknown, context: string): KubeError {
  if (err instanceof KubeError) return err;
  if (err instanceof ApiException) {
    return kubeErrorFromResponse(err.code, err.body, context, err);
  }
  if (isConnectionError(err)) {
    const message = err instanceof Error ? err.message : String(err);
    return new KubeError({
      code: KubeErrorCodes.unavailable,
      status: 0,
      reason: 'ConnectionError',
      message: `${context}: ${message}`,
      cause: err,
    });
  }
  const message = err instanceof Error ? err.message : String(err);
  return new KubeError({ code: KubeErrorCodes.unexpected, message: `${context}: ${message}`, cause: err });
}

/** Runs one client-node call and maps whatever it throws. */
export async function callKube<T>(context: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw toKubeError(err, context);
  }
}
