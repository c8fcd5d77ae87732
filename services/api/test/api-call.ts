/**
 * `call(method, path, body?, headers?)`: a JSON request to the api at `baseUrl()`, answered with its
 * status, its text and its JSON on demand. `baseUrl` is read at each call (a test knows it only once the
 * service has started); `token` is the bearer token.
 */
export function apiCaller(baseUrl: () => string, token: string) {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  return async (method: string, path: string, body?: unknown, extra: Record<string, string> = {}) => {
    const res = await fetch(`${baseUrl()}${path}`, {
      method,
      headers: { ...headers, ...extra },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) };
  };
}
