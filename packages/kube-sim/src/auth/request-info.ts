/**
 * What a request asks for, read from its method, path and query alone — as kube-apiserver's
 * RequestInfoFactory does, before it knows whether the resource exists — so a caller without rights
 * gets 403 for a type that does not exist, as on a real cluster, not a 404 that tells it so.
 */
import { nonResourceAttributes, type RequestAttributes } from './rbac-rules.js';

const namespaceSubresources = new Set(['status', 'finalize']);
const validPathSegment = /^[^/%]+$/;

/** `metadata.name=X` (or `==`) as the only requirement of a field selector: a list or watch of one name. */
function exactNameOf(fieldSelector: string | null): string | undefined {
  if (!fieldSelector) return undefined;
  const parts = fieldSelector.split(',');
  for (const part of parts) {
    const match = /^\s*metadata\.name\s*(?:==|=)\s*(.*?)\s*$/.exec(part);
    if (match && parts.length === 1) {
      const name = match[1]!;
      return name !== '' && name !== '.' && name !== '..' && validPathSegment.test(name) ? name : undefined;
    }
  }
  return undefined;
}

export function requestAttributesOf(method: string, segments: string[], url: URL): RequestAttributes {
  const nonResource = () => nonResourceAttributes(method.toLowerCase(), url.pathname);
  if (segments.length < 3) return nonResource();
  let parts = segments;
  let apiGroup = '';
  if (parts[0] === 'api') {
    parts = parts.slice(1);
  } else if (parts[0] === 'apis') {
    if (parts.length < 4) return nonResource();
    apiGroup = parts[1]!;
    parts = parts.slice(2);
  } else {
    return nonResource();
  }
  const apiVersion = parts[0]!;
  parts = parts.slice(1);
  let verb: string;
  if (parts[0] === 'watch' || parts[0] === 'proxy') {
    if (parts.length < 2) return nonResource();
    verb = parts[0];
    parts = parts.slice(1);
  } else {
    verb =
      { POST: 'create', GET: 'get', HEAD: 'get', PUT: 'update', PATCH: 'patch', DELETE: 'delete' }[method.toUpperCase()] ??
      method.toLowerCase();
  }
  let namespace = '';
  if (parts[0] === 'namespaces' && parts.length > 1) {
    namespace = parts[1]!;
    if (parts.length > 2 && !namespaceSubresources.has(parts[2]!)) parts = parts.slice(2);
  }
  const resource = parts[0] ?? '';
  let name = parts[1] ?? '';
  const subresource = parts.length >= 3 && verb !== 'proxy' ? parts[2]! : '';
  if (name === '' && verb === 'get') {
    const watch = url.searchParams.get('watch');
    verb = watch !== null && watch !== 'false' && watch !== '0' ? 'watch' : 'list';
  }
  if (name === '' && (verb === 'list' || verb === 'watch')) name = exactNameOf(url.searchParams.get('fieldSelector')) ?? '';
  if (name === '' && verb === 'delete') verb = 'deletecollection';
  return { verb, resourceRequest: true, apiGroup, apiVersion, resource, subresource, namespace, name, path: url.pathname };
}
