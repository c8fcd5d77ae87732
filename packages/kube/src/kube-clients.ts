import {
  ApiextensionsV1Api,
  ApisApi,
  AppsV1Api,
  CoreApi,
  CoreV1Api,
  CustomObjectsApi,
  createConfiguration,
  HttpMethod,
  KubeConfig,
  RequestContext,
  ServerConfiguration,
} from '@kubernetes/client-node';
import { KeepAliveAuthentication } from './keep-alive-auth.js';
import { callKube, KubeError, KubeErrorCodes, kubeErrorFromResponse } from './kube-errors.js';
import {
  createRetryStats,
  defaultRetryPolicy,
  type RetryContext,
  type RetryDeps,
  type RetryPolicy,
  type RetryStats,
  realRetryDeps,
} from './retry-policy.js';
import { RetryingHttpLibrary } from './retrying-http-library.js';

export interface KubeClientOptions {
  /** A kubeconfig file (what KUBECONFIG points at). */
  kubeconfigPath?: string | undefined;
  /** A kubeconfig document. */
  kubeconfigYaml?: string | undefined;
  /** The pod's service account (token, CA and namespace under /var/run/secrets/kubernetes.io/serviceaccount). */
  inCluster?: boolean | undefined;
  /** A KubeConfig the caller already loaded. */
  kubeConfig?: KubeConfig | undefined;
  /** Context to switch to after loading; the kubeconfig's current context otherwise. */
  context?: string | undefined;
  retryPolicy?: Partial<RetryPolicy> | undefined;
  /** Injected random/sleep/now: tests use these so backoff never sleeps for real. */
  retryDeps?: Partial<RetryDeps> | undefined;
  /** Per attempt; client-node has no request timeout of its own. Default 30 s. */
  requestTimeoutMs?: number | undefined;
  onRetry?: RetryContext['onRetry'];
}

export interface KubeClients {
  kubeConfig: KubeConfig;
  /** The API server URL of the current cluster. */
  server: string;
  core: CoreV1Api;
  coreApi: CoreApi;
  apps: AppsV1Api;
  customObjects: CustomObjectsApi;
  apis: ApisApi;
  apiextensions: ApiextensionsV1Api;
  /** Retry counters of every request made through these clients (for metrics). */
  retryStats: RetryStats;
  retry: RetryContext;
  /** The keep-alive connections of these clients (also for exec WebSockets). */
  connections: Pick<KeepAliveAuthentication, 'sharedAgentFor'>;
  /** A JSON request on any API path, with the kubeconfig's auth/TLS and the same retries. */
  requestJson<T>(request: KubeJsonRequest): Promise<T>;
}

export interface KubeJsonRequest {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Path below the server URL, e.g. `/api/v1/namespaces`. */
  path: string;
  query?: Record<string, string | number | boolean | undefined> | undefined;
  body?: unknown;
  /** Default `application/json`; use `application/merge-patch+json` for merge patches of custom resources. */
  contentType?: string | undefined;
  /** For error messages: what we were doing. */
  description?: string | undefined;
}

function loadKubeConfig(options: KubeClientOptions): KubeConfig {
  const sources = [options.kubeconfigPath, options.kubeconfigYaml, options.inCluster ? true : undefined, options.kubeConfig].filter(
    (source) => source !== undefined,
  );
  if (sources.length > 1) {
    throw new KubeError({
      code: KubeErrorCodes.badArgument,
      message: 'createKubeClients: give at most one of kubeconfigPath, kubeconfigYaml, inCluster, kubeConfig',
    });
  }
  if (options.kubeConfig) return options.kubeConfig;
  const kc = new KubeConfig();
  try {
    if (options.kubeconfigPath !== undefined) kc.loadFromFile(options.kubeconfigPath);
    else if (options.kubeconfigYaml !== undefined) kc.loadFromString(options.kubeconfigYaml);
    else if (options.inCluster) kc.loadFromCluster();
    else kc.loadFromDefault();
  } catch (err) {
    const source =
      options.kubeconfigPath ?? (options.kubeconfigYaml !== undefined ? 'kubeconfigYaml' : options.inCluster ? 'in-cluster' : 'default');
    throw new KubeError({
      code: KubeErrorCodes.configInvalid,
      message: `cannot load kubeconfig from ${source}: ${err instanceof Error ? err.message : String(err)}`,
      cause: err,
    });
  }
  return kc;
}

/**
 * Loads a kubeconfig and builds the typed client-node APIs on one retrying transport.
 * Throws KUBE_CONFIG_INVALID when the kubeconfig cannot be read or has no current cluster.
 */
export function createKubeClients(options: KubeClientOptions = {}): KubeClients {
  const kubeConfig = loadKubeConfig(options);
  if (options.context !== undefined) kubeConfig.setCurrentContext(options.context);
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) {
    throw new KubeError({
      code: KubeErrorCodes.configInvalid,
      message: `kubeconfig has no current cluster (current context: ${kubeConfig.getCurrentContext() || 'none'})`,
    });
  }
  const server = cluster.server.replace(/\/+$/, '');
  const retryStats = createRetryStats();
  const retry: RetryContext = {
    policy: { ...defaultRetryPolicy, ...options.retryPolicy },
    deps: { ...realRetryDeps, ...options.retryDeps },
    stats: retryStats,
    onRetry: options.onRetry,
  };
  const httpApi = new RetryingHttpLibrary(retry, options.requestTimeoutMs ?? 30_000);
  // The kubeconfig's auth on every request, on reused keep-alive connections.
  const auth = new KeepAliveAuthentication(kubeConfig);
  const configuration = createConfiguration({
    baseServer: new ServerConfiguration(server, {}),
    authMethods: { default: auth },
    httpApi,
  });

  async function requestJson<T>(request: KubeJsonRequest): Promise<T> {
    const method = request.method ?? 'GET';
    const description = request.description ?? `${method} ${request.path}`;
    if (!request.path.startsWith('/')) {
      throw new KubeError({
        code: KubeErrorCodes.badArgument,
        message: `requestJson: path must start with '/', got ${JSON.stringify(request.path)}`,
      });
    }
    const context = new RequestContext(server + request.path, HttpMethod[method]);
    for (const [name, value] of Object.entries(request.query ?? {})) {
      if (value !== undefined) context.setQueryParam(name, String(value));
    }
    context.setHeaderParam('Accept', 'application/json');
    if (request.body !== undefined) {
      context.setHeaderParam('Content-Type', request.contentType ?? 'application/json');
      context.setBody(JSON.stringify(request.body));
    }
    const response = await callKube(description, async () => {
      await auth.applySecurityAuthentication(context);
      return httpApi.send(context).toPromise();
    });
    const text = await callKube(description, () => response.body.text());
    if (response.httpStatusCode >= 400) throw kubeErrorFromResponse(response.httpStatusCode, text, description);
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new KubeError({
        code: KubeErrorCodes.unexpected,
        status: response.httpStatusCode,
        message: `${description}: response is not JSON: ${text.slice(0, 200)}`,
        cause: err,
      });
    }
  }

  return {
    kubeConfig,
    server,
    core: new CoreV1Api(configuration),
    coreApi: new CoreApi(configuration),
    apps: new AppsV1Api(configuration),
    customObjects: new CustomObjectsApi(configuration),
    apis: new ApisApi(configuration),
    apiextensions: new ApiextensionsV1Api(configuration),
    retryStats,
    retry,
    connections: auth,
    requestJson,
  };
}
