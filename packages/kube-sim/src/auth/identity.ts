/** Who a request is: Kubernetes' user info, and the names the API server gives service accounts and groups. */

export interface UserInfo {
  name: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

export const systemMasters = 'system:masters';
export const allAuthenticated = 'system:authenticated';
export const allUnauthenticated = 'system:unauthenticated';
export const anonymousUser = 'system:anonymous';
export const allServiceAccounts = 'system:serviceaccounts';

const serviceAccountPrefix = 'system:serviceaccount:';

export function serviceAccountUsername(namespace: string, name: string): string {
  return `${serviceAccountPrefix}${namespace}:${name}`;
}

/** `system:serviceaccount:NS:NAME` → {namespace, name}; undefined for any other user name. */
export function parseServiceAccountUsername(username: string): { namespace: string; name: string } | undefined {
  if (!username.startsWith(serviceAccountPrefix)) return undefined;
  const rest = username.slice(serviceAccountPrefix.length);
  const colon = rest.indexOf(':');
  if (colon <= 0 || colon === rest.length - 1 || rest.indexOf(':', colon + 1) >= 0) return undefined;
  return { namespace: rest.slice(0, colon), name: rest.slice(colon + 1) };
}

/** The groups the API server gives a service account's token (and an impersonated service account). */
export function serviceAccountGroups(namespace: string): string[] {
  return [allServiceAccounts, `${allServiceAccounts}:${namespace}`];
}

export function serviceAccountUser(namespace: string, name: string, uid?: string): UserInfo {
  const user: UserInfo = { name: serviceAccountUsername(namespace, name), groups: [...serviceAccountGroups(namespace), allAuthenticated] };
  if (uid) user.uid = uid;
  return user;
}

/** Adds `system:authenticated` once (every authenticated identity is in it). */
export function withAuthenticatedGroup(groups: string[]): string[] {
  return groups.includes(allAuthenticated) ? groups : [...groups, allAuthenticated];
}

export const anonymous: UserInfo = { name: anonymousUser, groups: [allUnauthenticated] };
