import {
  type HttpLibrary,
  IsomorphicFetchHttpLibrary,
  Observable,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import { type RetryContext, runWithRetry } from './retry-policy.js';

/**
 * client-node's HTTP transport with retries: every generated API call (CoreV1Api, CustomObjectsApi, ...)
 * and every raw request of this package goes through it, so no call site can forget to retry.
 * Each attempt also gets its own timeout, because client-node 1.4.0 sets none and a request to a
 * hung server would otherwise wait forever.
 */
export class RetryingHttpLibrary implements HttpLibrary {
  private readonly inner: HttpLibrary;

  constructor(
    private readonly ctx: RetryContext,
    private readonly requestTimeoutMs: number,
    inner?: HttpLibrary,
  ) {
    this.inner = inner ?? new IsomorphicFetchHttpLibrary();
  }

  send(request: RequestContext): Observable<ResponseContext> {
    return new Observable(this.sendWithRetry(request));
  }

  private async sendWithRetry(request: RequestContext): Promise<ResponseContext> {
    const callerSignal = request.getSignal();
    const description = `${request.getHttpMethod()} ${safePath(request.getUrl())}`;
    return runWithRetry(
      this.ctx,
      description,
      async (attempt) => {
        const timeout = AbortSignal.timeout(this.requestTimeoutMs);
        request.setSignal(callerSignal ? AbortSignal.any([callerSignal, timeout]) : timeout);
        if (attempt > 1 && callerSignal?.aborted) throw callerSignal.reason ?? new Error('aborted');
        return this.inner.send(request).toPromise();
      },
      (response) => ({ kind: 'status', status: response.httpStatusCode, retryAfter: response.headers['retry-after'] }),
      // Drain the body of an answer we retry so its socket is released.
      async (response) => {
        await response.body.text().catch(() => undefined);
      },
    );
  }
}

/** Path and query without credentials that a URL might carry, for log lines. */
function safePath(url: string): string {
  try {
    const parsed = new URL(url);
    return parsed.pathname;
  } catch {
    return url;
  }
}
