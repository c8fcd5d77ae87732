import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { isConnectionError, KubeError, toKubeError } from './kube-errors.js';

function status(code: number, reason: string, message: string): string {
  return JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message });
}

describe('toKubeError', () => {
  it.each([
    [404, 'NotFound', 'KUBE_NOT_FOUND'],
    [409, 'AlreadyExists', 'KUBE_ALREADY_EXISTS'],
    [409, 'Conflict', 'KUBE_CONFLICT'],
    [422, 'Invalid', 'KUBE_INVALID'],
    [400, 'BadRequest', 'KUBE_INVALID'],
    [401, 'Unauthorized', 'KUBE_UNAUTHORIZED'],
    [403, 'Forbidden', 'KUBE_FORBIDDEN'],
    [410, 'Expired', 'KUBE_EXPIRED'],
    [429, 'TooManyRequests', 'KUBE_UNAVAILABLE'],
    [503, 'ServiceUnavailable', 'KUBE_UNAVAILABLE'],
    [418, 'Teapot', 'KUBE_UNEXPECTED'],
  ])('maps ApiException %i %s to %s with the server message', (code, reason, expected) => {
    const body = status(code, reason, `pods "web" says ${reason}`);
    const err = toKubeError(
      new ApiException(code, `HTTP-Code: ${code} Message: Unknown API Status Code! Body: ${body}`, body, {}),
      'get pod a/web',
    );
    expect(err).toBeInstanceOf(KubeError);
    expect(err).toMatchObject({ code: expected, status: code, reason, message: `get pod a/web: pods "web" says ${reason}` });
    expect(err.cause).toBeInstanceOf(ApiException);
  });

  it('copes with a body that is not JSON', () => {
    const err = toKubeError(new ApiException(502, 'x', '<html>bad gateway</html>', {}), 'list pods');
    expect(err).toMatchObject({ code: 'KUBE_UNAVAILABLE', status: 502, reason: '', message: 'list pods: <html>bad gateway</html>' });
  });

  it('maps connection errors to KUBE_UNAVAILABLE with status 0', () => {
    const refused = Object.assign(new Error('request to http://127.0.0.1:9/api failed, reason: connect ECONNREFUSED'), {
      code: 'ECONNREFUSED',
    });
    expect(toKubeError(refused, 'discovery')).toMatchObject({ code: 'KUBE_UNAVAILABLE', status: 0, reason: 'ConnectionError' });
    expect(isConnectionError(new Error('socket hang up'))).toBe(true);
    expect(isConnectionError(new Error('wrapped', { cause: refused }))).toBe(true);
  });

  it('keeps a KubeError as it is and calls anything else unexpected', () => {
    const original = new KubeError({ code: 'KUBE_FORBIDDEN', message: 'no' });
    expect(toKubeError(original, 'x')).toBe(original);
    expect(toKubeError(new TypeError('boom'), 'x')).toMatchObject({ code: 'KUBE_UNEXPECTED', message: 'x: boom' });
  });
});
