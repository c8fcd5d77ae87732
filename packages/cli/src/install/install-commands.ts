import { randomBytes } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { parseCommand, serialise } from '../args.js';
import { type CliIo, confirm } from '../cli-io.js';
import { CliError, CliErrorCode, ExitCode } from '../errors.js';
import { Cluster } from './cluster-apply.js';
import {
  API_TOKENS_SECRET,
  type InstallOptions,
  keptOnUninstall,
  NAMESPACE,
  objectRef,
  planInstall,
  REPO_KEY_SECRET,
  replicaComponents,
} from './install-plan.js';
import { INSTALL_USAGE } from './install-usage.js';
import { type KubeManifest, loadManifests, type StorageLayout } from './manifests.js';

const OPTIONS = {
  storage: { type: 'string' },
  's3-endpoint': { type: 'string' },
  's3-region': { type: 'string' },
  'secret-file': { type: 'string' },
  image: { type: 'string' },
  tag: { type: 'string' },
  'redis-url': { type: 'string' },
  replicas: { type: 'string' },
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  'dry-run': { type: 'boolean' },
  confirm: { type: 'boolean' },
} as const;

const INSTALL_FLAGS = Object.keys(OPTIONS).filter((f) => f !== 'confirm');
const UNINSTALL_FLAGS = ['kubeconfig', 'context', 'confirm'];

/** Bound on the credentials file: an AWS credentials file is a few hundred bytes. */
const SECRET_FILE_MAX_BYTES = 64 * 1024;

const usage = (message: string) => new CliError(CliErrorCode.usage, message);

/** The [default] profile's keys of an AWS shared credentials file (Velero's --secret-file). */
export function parseAwsCredentials(text: string, file: string): { accessKeyId: string; secretAccessKey: string } {
  let profile: string | undefined;
  const keys: Record<string, string> = {};
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const section = /^\[\s*([^\]]+?)\s*\]$/.exec(line);
    if (section) {
      profile = section[1];
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0) throw usage(`--secret-file: ${file} line ${i + 1} is not key = value (an AWS credentials file, profile [default])`);
    if (profile === 'default') keys[line.slice(0, eq).trim().toLowerCase()] = line.slice(eq + 1).trim();
  }
  const accessKeyId = keys.aws_access_key_id;
  const secretAccessKey = keys.aws_secret_access_key;
  if (!accessKeyId || !secretAccessKey)
    throw usage(`--secret-file: ${file} has no aws_access_key_id and aws_secret_access_key in its [default] profile`);
  return { accessKeyId, secretAccessKey };
}

function parseReplicas(value: string, components: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const pair of value.split(',').map((s) => s.trim())) {
    const m = /^([a-z0-9-]+)=(\d{1,3})$/.exec(pair);
    if (!m) throw usage(`--replicas: "${pair}" is not COMPONENT=N (e.g. api=2,worker=3)`);
    const [, component, n] = m as unknown as [string, string, string];
    if (!components.includes(component))
      throw usage(`--replicas: no component "${component}"; the deployment has ${components.join(', ')}`);
    const count = Number(n);
    if (count < 1 || count > 100) throw usage(`--replicas: ${component}=${count} is out of range 1..100`);
    out[component] = count;
  }
  return out;
}

function checkUrl(flag: string, value: string, protocols: readonly string[]): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw usage(`--${flag}: "${value}" is not a URL`);
  }
  if (!protocols.includes(url.protocol))
    throw usage(`--${flag}: "${value}" must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  return value;
}

/** The storage layout and the options a user gave, checked one flag at a time. */
async function installOptionsOf(
  values: Record<string, string | boolean | undefined>,
): Promise<{ layout: StorageLayout; options: InstallOptions }> {
  const str = (flag: string) => values[flag] as string | undefined;
  const storage = str('storage');
  if (storage !== undefined && !/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/\S*)?$/.test(storage))
    throw usage(
      `--storage: "${storage}" is not s3://BUCKET[/PREFIX]; leave it out to keep backups on the stowage-backups claim (k8s/base/storage-pvc.yaml)`,
    );
  const layout: StorageLayout = storage ? 's3' : 'claim';
  for (const flag of ['s3-endpoint', 's3-region', 'secret-file'])
    if (layout === 'claim' && str(flag) !== undefined) throw usage(`--${flag}: only with --storage s3://…`);
  const secretFile = str('secret-file');
  if (layout === 's3' && secretFile === undefined)
    throw usage('--secret-file: --storage s3://… needs the bucket credentials (an AWS credentials file, profile [default])');
  let s3Credentials: InstallOptions['s3Credentials'];
  if (secretFile !== undefined) {
    const info = await stat(secretFile).catch(() => undefined);
    if (!info?.isFile()) throw usage(`--secret-file: ${secretFile} is not a readable file`);
    if (info.size > SECRET_FILE_MAX_BYTES) throw usage(`--secret-file: ${secretFile} is over ${SECRET_FILE_MAX_BYTES} bytes`);
    s3Credentials = parseAwsCredentials(await readFile(secretFile, 'utf8'), secretFile);
  }
  const image = str('image');
  if (image !== undefined && !/^[a-z0-9][a-z0-9._/:-]*[a-z0-9]$/.test(image))
    throw usage(`--image: "${image}" is not an image repository (e.g. registry.example.com/stowage)`);
  const tag = str('tag');
  if (tag !== undefined && !/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(tag)) throw usage(`--tag: "${tag}" is not an image tag`);
  return {
    layout,
    options: {
      storage,
      s3Endpoint: str('s3-endpoint') === undefined ? undefined : checkUrl('s3-endpoint', str('s3-endpoint') as string, ['http:', 'https:']),
      s3Region: str('s3-region'),
      s3Credentials,
      image,
      tag,
      redisUrl: str('redis-url') === undefined ? undefined : checkUrl('redis-url', str('redis-url') as string, ['redis:', 'rediss:']),
    },
  };
}

export async function runInstallCommand(verb: 'install' | 'uninstall', argv: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(verb, argv, OPTIONS, verb === 'install' ? INSTALL_FLAGS : UNINSTALL_FLAGS);
  const out = (line: string) => io.stdout.write(`${line}\n`);
  if (values.help) {
    out(INSTALL_USAGE);
    return ExitCode.ok;
  }
  if (positionals.length > 0) throw usage(`${verb}: takes no arguments, got ${positionals.join(' ')}`);
  const target = { kubeconfig: values.kubeconfig, context: values.context };
  return verb === 'install' ? install(values, target, io) : uninstall(values.confirm === true, target, io);
}

async function install(
  values: Record<string, string | boolean | undefined>,
  target: { kubeconfig?: string | undefined; context?: string | undefined },
  io: CliIo,
): Promise<number> {
  const out = (line: string) => io.stdout.write(`${line}\n`);
  const format = values.output as string | undefined;
  if (format !== undefined && (!values['dry-run'] || (format !== 'yaml' && format !== 'json')))
    throw usage('install: -o yaml|json prints the objects with --dry-run (and nothing else)');
  const { layout, options } = await installOptionsOf(values);
  const rendered = await loadManifests(layout);
  if (values.replicas !== undefined) options.replicas = parseReplicas(values.replicas as string, replicaComponents(rendered));
  const planned = planInstall(rendered, options, () => randomBytes(32).toString('hex'));
  if (values['dry-run']) {
    if (format === 'yaml') out(planned.map((p) => serialise('yaml', p.object)).join('\n---\n'));
    else if (format === 'json') out(serialise('json', { apiVersion: 'v1', kind: 'List', items: planned.map((p) => p.object) }));
    else for (const p of planned) out(`${objectRef(p.object)} (dry run)`);
    return ExitCode.ok;
  }
  const cluster = Cluster.connect(target);
  for (const p of planned) out(`${objectRef(p.object)} ${await cluster.apply(p)}`);
  out('');
  out(`Stowage is installed in namespace ${NAMESPACE} (${cluster.server}).`);
  out(`The API token: kubectl -n ${NAMESPACE} get secret ${API_TOKENS_SECRET} -o jsonpath='{.data.tokens}' | base64 -d`);
  out(
    `Keep the repository key (secret ${REPO_KEY_SECRET}) somewhere safe: without it no backed-up volume can be read. Uninstall keeps it.`,
  );
  return ExitCode.ok;
}

/** Every object any install makes, whatever its flags: both storage layouts, the bundled Redis and every secret. */
async function everythingInstalled(): Promise<KubeManifest[]> {
  const byRef = new Map<string, KubeManifest>();
  const full = { s3Credentials: { accessKeyId: '-', secretAccessKey: '-' }, redisUrl: 'redis://-' };
  for (const layout of ['claim', 's3'] as const) {
    const rendered = await loadManifests(layout);
    for (const p of [...planInstall(rendered, {}, () => '-'), ...planInstall(rendered, full, () => '-')])
      byRef.set(`${objectRef(p.object)} ${p.object.metadata.namespace ?? ''}`, p.object);
  }
  return [...byRef.values()];
}

async function uninstall(
  confirmed: boolean,
  target: { kubeconfig?: string | undefined; context?: string | undefined },
  io: CliIo,
): Promise<number> {
  const out = (line: string) => io.stdout.write(`${line}\n`);
  const objects = await everythingInstalled();
  const cluster = Cluster.connect(target);
  if (!(await confirm(io, confirmed, 'uninstall', `Delete Stowage (its CRDs, RBAC, workloads and Secrets) from ${cluster.server}`))) {
    out('uninstall: nothing deleted');
    return ExitCode.ok;
  }
  // Workloads first, the CRDs and the RBAC last: the reverse of the install order.
  const kept: string[] = [];
  for (const object of [...objects].reverse()) {
    if (keptOnUninstall(object)) {
      if (await cluster.get(object)) kept.push(objectRef(object));
      continue;
    }
    const outcome = await cluster.delete(object);
    if (outcome === 'deleted') out(`${objectRef(object)} deleted`);
  }
  out('');
  out(`Stowage is uninstalled. The storage is untouched; kept: ${kept.reverse().join(', ') || 'nothing'}.`);
  out(`A reinstall uses the kept repository key; to remove the rest too: kubectl delete namespace ${NAMESPACE}`);
  return ExitCode.ok;
}
