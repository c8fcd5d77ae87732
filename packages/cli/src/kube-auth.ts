import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { CliError, CliErrorCode } from './errors.js';

/*
 * The global flags of the API commands (backup, schedule, restore), as kubectl's: `-n/--namespace`
 * (create namespaced backups and restores, list one namespace's) and `--kubeconfig FILE` (call the
 * API as the kubeconfig's current user: its bearer token, which the API reviews with the cluster
 * when STOWAGE_KUBE_AUTH=enabled; docs/tenancy.md).
 */

export interface GlobalFlags {
  argv: string[];
  namespace: string | undefined;
  kubeconfig: string | undefined;
}

/** Takes `-n NS`, `--namespace[=]NS` and `--kubeconfig[=]FILE` out of `argv`, wherever they are. */
export function takeGlobalFlags(argv: readonly string[]): GlobalFlags {
  const out: string[] = [];
  let namespace: string | undefined;
  let kubeconfig: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const eq = /^--(namespace|kubeconfig)=(.*)$/.exec(arg);
    const flag = eq ? eq[1] : arg === '-n' || arg === '--namespace' ? 'namespace' : arg === '--kubeconfig' ? 'kubeconfig' : undefined;
    if (!flag) {
      out.push(arg);
      continue;
    }
    const value = eq ? eq[2] : argv[++i];
    if (value === undefined || value === '') throw new CliError(CliErrorCode.usage, `flag --${flag} needs a value`);
    if (flag === 'namespace') namespace = value;
    else kubeconfig = value;
  }
  return { argv: out, namespace, kubeconfig };
}

interface KubeconfigDoc {
  'current-context'?: string;
  contexts?: Array<{ name?: string; context?: { user?: string } }>;
  users?: Array<{ name?: string; user?: { token?: string; tokenFile?: string; exec?: unknown; 'client-certificate-data'?: string } }>;
}

/** The bearer token of the kubeconfig's current context's user (`token` or `tokenFile`). */
export function tokenFromKubeconfig(path: string): string {
  let doc: KubeconfigDoc;
  try {
    doc = (parseYaml(readFileSync(path, 'utf8')) ?? {}) as KubeconfigDoc;
  } catch (err) {
    throw new CliError(CliErrorCode.config, `--kubeconfig ${path}: cannot read it (${(err as Error).message})`, [], { cause: err });
  }
  const contextName = doc['current-context'];
  if (!contextName) throw new CliError(CliErrorCode.config, `--kubeconfig ${path}: no current-context`);
  const userName = doc.contexts?.find((c) => c.name === contextName)?.context?.user;
  const user = doc.users?.find((u) => u.name === userName)?.user;
  if (!user) throw new CliError(CliErrorCode.config, `--kubeconfig ${path}: context "${contextName}" names no user of the file`);
  if (user.token) return user.token;
  if (user.tokenFile) {
    try {
      return readFileSync(user.tokenFile, 'utf8').trim();
    } catch (err) {
      throw new CliError(CliErrorCode.config, `--kubeconfig ${path}: cannot read tokenFile ${user.tokenFile}`, [], { cause: err });
    }
  }
  const kind = user.exec ? 'an exec plugin' : user['client-certificate-data'] ? 'a client certificate' : 'no token';
  throw new CliError(
    CliErrorCode.config,
    `--kubeconfig ${path}: user "${userName}" authenticates with ${kind}; the Stowage API takes a bearer token (token or tokenFile), e.g. from \`kubectl create token\``,
  );
}
