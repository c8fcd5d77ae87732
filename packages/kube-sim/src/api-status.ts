/** Kubernetes `Status` bodies, and the error the request handlers throw to answer with one. */

export type StatusReason =
  | 'NotFound'
  | 'AlreadyExists'
  | 'Conflict'
  | 'Invalid'
  | 'BadRequest'
  | 'MethodNotAllowed'
  | 'Gone'
  | 'Expired'
  | 'UnsupportedMediaType'
  | 'NotAcceptable'
  | 'TooManyRequests'
  | 'InternalError'
  | 'ServiceUnavailable'
  | 'Timeout'
  | 'Unauthorized'
  | 'Forbidden';

export interface StatusCause {
  reason?: string;
  message: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export interface KubeStatus {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Success' | 'Failure';
  message?: string;
  reason?: StatusReason | string;
  details?: StatusDetails;
  code: number;
}

const codeByReason: Record<StatusReason, number> = {
  NotFound: 404,
  AlreadyExists: 409,
  Conflict: 409,
  Invalid: 422,
  BadRequest: 400,
  MethodNotAllowed: 405,
  Gone: 410,
  Expired: 410,
  UnsupportedMediaType: 415,
  NotAcceptable: 406,
  TooManyRequests: 429,
  InternalError: 500,
  ServiceUnavailable: 503,
  Timeout: 504,
  Unauthorized: 401,
  Forbidden: 403,
};

export function failureStatus(reason: StatusReason, message: string, details?: StatusDetails): KubeStatus {
  const status: KubeStatus = {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    code: codeByReason[reason],
  };
  if (details) status.details = details;
  return status;
}

export function successStatus(details?: StatusDetails): KubeStatus {
  const status: KubeStatus = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 200 };
  if (details) status.details = details;
  return status;
}

/** Thrown inside request handling; the router turns it into the Status answer. */
export class ApiError extends Error {
  readonly status: KubeStatus;
  readonly headers: Record<string, string>;
  constructor(status: KubeStatus, headers: Record<string, string> = {}) {
    super(status.message ?? status.reason ?? 'error');
    this.name = 'ApiError';
    this.status = status;
    this.headers = headers;
  }
}

export function apiError(reason: StatusReason, message: string, details?: StatusDetails): ApiError {
  return new ApiError(failureStatus(reason, message, details));
}

/** `pods "web-0" not found`, with the resource written as the API server writes it (`podvolumebackups.stowage.dev`). */
export function notFound(resource: string, group: string, name: string): ApiError {
  const qualified = group ? `${resource}.${group}` : resource;
  return apiError('NotFound', `${qualified} "${name}" not found`, { name, group, kind: resource });
}

export function alreadyExists(resource: string, group: string, name: string): ApiError {
  const qualified = group ? `${resource}.${group}` : resource;
  return apiError('AlreadyExists', `${qualified} "${name}" already exists`, { name, group, kind: resource });
}

export function conflict(resource: string, group: string, name: string): ApiError {
  const qualified = group ? `${resource}.${group}` : resource;
  return apiError(
    'Conflict',
    `Operation cannot be fulfilled on ${qualified} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    { name, group, kind: resource },
  );
}

/**
 * kube-apiserver's Forbidden: `deployments.apps "web" is forbidden: <why>` (`deployments.apps is
 * forbidden: …` without a name, `forbidden: …` without a resource).
 */
export function forbidden(resource: string, group: string, name: string, why: string): ApiError {
  const qualified = group ? `${resource}.${group}` : resource;
  const message =
    qualified === ''
      ? `forbidden: ${why}`
      : name === ''
        ? `${qualified} is forbidden: ${why}`
        : `${qualified} ${JSON.stringify(name)} is forbidden: ${why}`;
  const details: StatusDetails = {};
  if (name) details.name = name;
  if (group) details.group = group;
  if (resource) details.kind = resource;
  return apiError('Forbidden', message, details);
}

export function invalid(kind: string, group: string, name: string, causes: StatusCause[]): ApiError {
  const qualifiedKind = group ? `${kind}.${group}` : kind;
  const summary = causes.map((cause) => (cause.field ? `${cause.field}: ${cause.message}` : cause.message)).join(', ');
  return apiError('Invalid', `${qualifiedKind} "${name}" is invalid: ${summary}`, { name, group, kind, causes });
}

/**
 * Error codes of the simulator's own (non-Kubernetes) surfaces: fixture loading, control API, CLI.
 * Kubernetes API answers use Status reasons instead.
 */
export const SimErrorCode = {
  FIXTURE_UNREADABLE: 'FIXTURE_UNREADABLE',
  FIXTURE_INVALID: 'FIXTURE_INVALID',
  CONTROL_BAD_REQUEST: 'CONTROL_BAD_REQUEST',
  CONTROL_NOT_FOUND: 'CONTROL_NOT_FOUND',
  CLI_BAD_ARGUMENT: 'CLI_BAD_ARGUMENT',
  TLS_UNAVAILABLE: 'TLS_UNAVAILABLE',
} as const;
export type SimErrorCode = (typeof SimErrorCode)[keyof typeof SimErrorCode];

export class SimError extends Error {
  readonly code: SimErrorCode;
  constructor(code: SimErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SimError';
    this.code = code;
  }
}
