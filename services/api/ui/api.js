// The console's only way to the API: every request carries the bearer token from sessionStorage.

const TOKEN_KEY = 'stowage.token';

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(IDENTITY_KEY);
}

const IDENTITY_KEY = 'stowage.identity';

/** Who the API takes the token for (GET /v1/identity: `{kind, username?, groups?, description}`), once known. */
export function getIdentity() {
  try {
    return JSON.parse(sessionStorage.getItem(IDENTITY_KEY) ?? 'null') ?? undefined;
  } catch {
    return undefined;
  }
}

export function setIdentity(identity) {
  sessionStorage.setItem(IDENTITY_KEY, JSON.stringify(identity));
}

/**
 * A failed request in words: a refusal (403) says so, with the API's reason — kube-apiserver's
 * `User "alice" cannot create resource "backups" in API group "stowage.dev" in the namespace "b"`.
 */
export function explainFailure(err) {
  if (err?.status === 403) return `Refused: ${err.message}`;
  return err?.message ?? String(err);
}

/** The API answered 401: the token is missing, wrong or no longer configured. */
export class UnauthorizedError extends Error {
  constructor(message) {
    super(message);
    this.name = 'UnauthorizedError';
  }
}

/**
 * Any other answer outside 2xx, with the API's `{ error: { code, message, problems? } }` when there
 * is one: `problems` are the validation problems, each `{ path, message }` (forms show them by field).
 */
export class ApiRequestError extends Error {
  constructor(status, code, message, problems = []) {
    super(message);
    this.name = 'ApiRequestError';
    this.status = status;
    this.code = code;
    this.problems = problems;
  }
}

const listeners = new Set();
/** Called with the error whenever any request is answered 401 (the app goes back to the prompt). */
export function onUnauthorized(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

async function errorOf(res) {
  let code = `HTTP_${res.status}`;
  let message = `${res.status} ${res.statusText}`;
  let problems = [];
  try {
    const body = await res.json();
    if (body?.error) {
      code = body.error.code ?? code;
      message = body.error.message ?? message;
      if (Array.isArray(body.error.problems)) problems = body.error.problems;
    }
  } catch {
    // not JSON: keep the status line
  }
  return res.status === 401 ? new UnauthorizedError(message) : new ApiRequestError(res.status, code, message, problems);
}

/**
 * fetch() with `Authorization: Bearer <token>`. Throws UnauthorizedError on 401 (and tells the
 * listeners), ApiRequestError on other failures. `token` overrides the stored one (the prompt
 * checks a token before keeping it).
 */
export async function apiFetch(path, { method = 'GET', body, headers = {}, signal, token = getToken() } = {}) {
  if (!token) {
    const err = new UnauthorizedError('no token given');
    for (const l of listeners) l(err);
    throw err;
  }
  const res = await fetch(path, {
    method,
    signal,
    credentials: 'same-origin',
    cache: 'no-store',
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'application/json',
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  if (!res.ok) {
    const err = await errorOf(res);
    if (err instanceof UnauthorizedError) for (const l of listeners) l(err);
    throw err;
  }
  return res;
}

export async function apiJson(path, options) {
  const res = await apiFetch(path, options);
  return res.json();
}

export const api = {
  listBackups: (limit = 50, cursor) => apiJson(`/v1/backups?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
  getBackup: (name) => apiJson(`/v1/backups/${encodeURIComponent(name)}`),
  blocks: (name, cursor, limit = 500) =>
    apiJson(`/v1/backups/${encodeURIComponent(name)}/blocks?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
  createBackup: (body) => apiJson('/v1/backups', { method: 'POST', body }),
  /** The plan a backup of this request would make; nothing is created. */
  planBackup: (body) => apiJson('/v1/backups?dryRun=true', { method: 'POST', body }),
  cancelBackup: (name) => apiJson(`/v1/backups/${encodeURIComponent(name)}/cancel`, { method: 'POST' }),
  deleteBackup: (name) => apiJson(`/v1/backups/${encodeURIComponent(name)}`, { method: 'DELETE' }),
  listSchedules: () => apiJson('/v1/schedules'),
  createSchedule: (body) => apiJson('/v1/schedules', { method: 'POST', body }),
  /** `spec`: the fields to change (`{paused: true}`). */
  changeSchedule: (name, spec) => apiJson(`/v1/schedules/${encodeURIComponent(name)}`, { method: 'PATCH', body: { spec } }),
  /** A backup from the schedule's template now (`stowage backup create --from-schedule`). */
  runSchedule: (name) => apiJson(`/v1/schedules/${encodeURIComponent(name)}/backups`, { method: 'POST' }),
  deleteSchedule: (name) => apiJson(`/v1/schedules/${encodeURIComponent(name)}`, { method: 'DELETE' }),
  createRestore: (body) => apiJson('/v1/restores', { method: 'POST', body }),
  cancelRestore: (name) => apiJson(`/v1/restores/${encodeURIComponent(name)}/cancel`, { method: 'POST' }),
  deleteRestore: (name) => apiJson(`/v1/restores/${encodeURIComponent(name)}`, { method: 'DELETE' }),
  listRestores: (limit = 50, cursor) => apiJson(`/v1/restores?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
  getRestore: (name) => apiJson(`/v1/restores/${encodeURIComponent(name)}`),
  restoreItems: (name, limit = 500) => apiJson(`/v1/restores/${encodeURIComponent(name)}/items?limit=${limit}`),
  logs: async (name, kind = 'backup') => {
    const text = await (await apiFetch(`/v1/${kind}s/${encodeURIComponent(name)}/logs`)).text();
    return text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l));
  },
  /** Checks a token before keeping it: resolves to who the API takes it for, or throws UnauthorizedError. */
  checkToken: (token) => apiJson('/v1/identity', { token }),
  identity: () => apiJson('/v1/identity'),
  openSession: () => apiJson('/v1/session', { method: 'POST' }),
  closeSession: (token) => apiJson('/v1/session', { method: 'DELETE', token }),
};
