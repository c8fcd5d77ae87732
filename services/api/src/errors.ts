/**
 * The API's error catalogue: every error a client sees has one of these stable codes and
 * travels as `{ error: { code, message, requestId } }`. HTTP status is decided here, by table.
 */
export const ApiErrorCode = {
  validation: 'API_VALIDATION',
  badJson: 'API_BAD_JSON',
  badRequest: 'API_BAD_REQUEST',
  unauthorized: 'API_UNAUTHORIZED',
  forbidden: 'API_FORBIDDEN',
  notFound: 'API_NOT_FOUND',
  routeNotFound: 'API_ROUTE_NOT_FOUND',
  methodNotAllowed: 'API_METHOD_NOT_ALLOWED',
  conflict: 'API_CONFLICT',
  tooManyRequests: 'API_TOO_MANY_REQUESTS',
  payloadTooLarge: 'API_PAYLOAD_TOO_LARGE',
  unsupportedMediaType: 'API_UNSUPPORTED_MEDIA_TYPE',
  unavailable: 'API_UNAVAILABLE',
  internal: 'API_INTERNAL',
} as const;
export type ApiErrorCode = (typeof ApiErrorCode)[keyof typeof ApiErrorCode];

export const HTTP_STATUS_OF: Readonly<Record<ApiErrorCode, number>> = {
  API_VALIDATION: 400,
  API_BAD_JSON: 400,
  API_BAD_REQUEST: 400,
  API_UNAUTHORIZED: 401,
  API_FORBIDDEN: 403,
  API_NOT_FOUND: 404,
  API_ROUTE_NOT_FOUND: 404,
  API_METHOD_NOT_ALLOWED: 405,
  API_CONFLICT: 409,
  API_TOO_MANY_REQUESTS: 429,
  API_PAYLOAD_TOO_LARGE: 413,
  API_UNSUPPORTED_MEDIA_TYPE: 415,
  API_UNAVAILABLE: 503,
  API_INTERNAL: 500,
};

/** One problem with a request, located by its JSON path (`spec.hooks.resources[0].pre[0].exec.command`). */
export interface ApiProblem {
  path: string;
  message: string;
}

export interface ApiErrorBody {
  error: {
    code: ApiErrorCode;
    message: string;
    requestId: string;
    /** Every validation problem, when there are several (API_VALIDATION). */
    problems?: ApiProblem[];
  };
}

/** An expected failure a route answers with (not a bug): mapped to HTTP by `HTTP_STATUS_OF`. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  /** A plain field (fastify assigns `statusCode` on errors it wraps). */
  readonly statusCode: number;
  constructor(
    readonly code: ApiErrorCode,
    message: string,
    readonly problems?: ApiProblem[],
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.statusCode = HTTP_STATUS_OF[code];
  }
}

/** The first problems as one line for the error message; `problems` in the body has them all. */
export function describeProblems(problems: readonly ApiProblem[]): string {
  const shown = problems.slice(0, 5).map((p) => `${p.path}: ${p.message}`);
  const more = problems.length > 5 ? `; and ${problems.length - 5} more (see problems)` : '';
  return shown.join('; ') + more;
}

/** A 400 listing every problem of a request body (`what`: "backup request", "schedule", …). */
export function invalidRequest(what: string, problems: ApiProblem[]): ApiError {
  return new ApiError(ApiErrorCode.validation, `invalid ${what}: ${describeProblems(problems)}`, problems);
}

export function errorBody(code: ApiErrorCode, message: string, requestId: string, problems?: ApiProblem[]): ApiErrorBody {
  return { error: problems && problems.length > 0 ? { code, message, requestId, problems } : { code, message, requestId } };
}
