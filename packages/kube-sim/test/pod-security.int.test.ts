import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type Simulator, startSimulator } from '../src/index.js';
import { kubectlRunner } from './kubectl-helper.js';
import { apiExceptionBody, kubeConfigFromYaml, rawRequest } from './sim-helpers.js';

/*
 * Pod Security admission through the API (raw requests for the headers, client-node, kubectl): the
 * namespace labels choose the levels; enforce refuses a pod with every violated rule named, warn and
 * workload templates warn, labelling a namespace warns about the pods it already has.
 */
const restrictedContainer = {
  securityContext: {
    runAsNonRoot: true,
    runAsUser: 65532,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  },
};
const pod = (name: string, spec: Record<string, unknown>, metadata: Record<string, unknown> = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, ...metadata },
  spec,
});

describe('Pod Security admission', () => {
  let sim: Simulator;
  let kubectl: ReturnType<typeof kubectlRunner>;
  let core: k8s.CoreV1Api;
  const ns = (name: string, labels: Record<string, string>) => core.createNamespace({ body: { metadata: { name, labels } } });
  const create = (namespace: string, body: unknown) =>
    rawRequest(sim, 'POST', `/api/v1/namespaces/${namespace}/pods`, { token: sim.adminToken, body });

  beforeAll(async () => {
    sim = await startSimulator({ materializeVolumes: 'none' });
    kubectl = kubectlRunner(sim.kubeconfigPath);
    core = kubeConfigFromYaml(sim.kubeconfigYaml).makeApiClient(k8s.CoreV1Api);
    await ns('locked', { 'pod-security.kubernetes.io/enforce': 'restricted' });
    await ns('watched', { 'pod-security.kubernetes.io/enforce': 'baseline', 'pod-security.kubernetes.io/warn': 'restricted' });
  });
  afterAll(async () => {
    kubectl?.cleanup();
    await sim?.close();
  });

  it('refuses a pod that violates the enforce level with 403, naming every violated rule (init containers too)', async () => {
    const res = await create(
      'locked',
      pod('loose', {
        hostNetwork: true,
        initContainers: [{ name: 'init', image: 'busybox', securityContext: { privileged: true } }],
        containers: [{ name: 'app', image: 'nginx', ports: [{ containerPort: 80, hostPort: 8080 }] }],
        volumes: [{ name: 'host', hostPath: { path: '/var/run' } }],
      }),
    );
    expect(res.status).toBe(403);
    expect(res.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'pods "loose" is forbidden: violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true), ' +
        'hostPort (container "app" uses hostPort 8080), privileged (container "init" must not set securityContext.privileged=true), ' +
        'allowPrivilegeEscalation != false (containers "init", "app" must set securityContext.allowPrivilegeEscalation=false), ' +
        'unrestricted capabilities (containers "init", "app" must set securityContext.capabilities.drop=["ALL"]), ' +
        'restricted volume types (volume "host" uses restricted volume type "hostPath"), ' +
        'runAsNonRoot != true (pod or containers "init", "app" must set securityContext.runAsNonRoot=true), ' +
        'seccompProfile (pod or containers "init", "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
      reason: 'Forbidden',
      details: { name: 'loose', kind: 'pods' },
      code: 403,
    });
    expect(sim.state.store.get('pods', 'locked', 'loose')).toBeUndefined();
  });

  it('admits a pod that meets restricted, with an init container like the restore-wait one', async () => {
    const res = await create(
      'locked',
      pod('tight', {
        initContainers: [{ name: 'stowage-restore-wait', image: 'stowage/node-agent:1.0.0', ...restrictedContainer }],
        containers: [{ name: 'app', image: 'nginx', ...restrictedContainer }],
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }, { name: 'scratch' }],
      }),
    );
    expect(res.status).toBe(201);
    expect(res.headers.get('warning')).toBeNull();
  });

  it('warns about the warn level (a Warning header) and admits what the enforce level allows', async () => {
    const res = await create('watched', pod('rooted', { containers: [{ name: 'app', image: 'nginx' }] }));
    expect(res.status).toBe(201);
    expect(res.headers.get('warning')).toBe(
      `299 - ${JSON.stringify(
        'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "app" must set securityContext.allowPrivilegeEscalation=false), ' +
          'unrestricted capabilities (container "app" must set securityContext.capabilities.drop=["ALL"]), ' +
          'runAsNonRoot != true (pod or container "app" must set securityContext.runAsNonRoot=true), ' +
          'seccompProfile (pod or container "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
      )}`,
    );
    const refused = await create('watched', pod('host', { hostPID: true, containers: [{ name: 'app', image: 'nginx' }] }));
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(
      /^pods "host" is forbidden: violates PodSecurity "baseline:latest": host namespaces \(hostPID=true\)$/,
    );
  });

  it('only warns about a workload’s pod template (the enforce level warns by default), as kube-apiserver does', async () => {
    const deployment = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: {
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'web', image: 'nginx', securityContext: { privileged: true } }] },
        },
      },
    };
    const res = await rawRequest(sim, 'POST', '/apis/apps/v1/namespaces/locked/deployments', { token: sim.adminToken, body: deployment });
    expect(res.status).toBe(201);
    expect(res.headers.get('warning')).toMatch(
      /^299 - "would violate PodSecurity \\"restricted:latest\\": privileged \(container \\"web\\" must not set/,
    );
    // kubectl shows it the way it shows the API server's warnings.
    const file = join(kubectl.home, 'cron.yaml');
    writeFileSync(
      file,
      stringify({
        apiVersion: 'batch/v1',
        kind: 'CronJob',
        metadata: { name: 'nightly', namespace: 'locked' },
        spec: {
          schedule: '0 3 * * *',
          jobTemplate: {
            spec: {
              template: {
                spec: {
                  restartPolicy: 'Never',
                  containers: [
                    {
                      name: 'job',
                      image: 'busybox',
                      ...restrictedContainer,
                      securityContext: { ...restrictedContainer.securityContext, runAsUser: 0 },
                    },
                  ],
                },
              },
            },
          },
        },
      }),
    );
    const applied = await kubectl.run(['apply', '-f', file]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stderr).toContain(
      'Warning: would violate PodSecurity "restricted:latest": runAsUser=0 (container "job" must not set runAsUser=0)',
    );
  });

  it('kubectl apply of a violating pod fails with the API server’s message', async () => {
    const file = join(kubectl.home, 'pod.yaml');
    writeFileSync(
      file,
      stringify({ ...pod('plain', { containers: [{ name: 'c', image: 'nginx' }] }), metadata: { name: 'plain', namespace: 'locked' } }),
    );
    const applied = await kubectl.run(['apply', '-f', file]);
    expect(applied.code).not.toBe(0);
    expect(applied.stderr).toContain(
      'pods "plain" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false)',
    );
  });

  it('checks a pod update only when it changes what the standard looks at (an image), as kube-apiserver', async () => {
    // A pod that predates the label (the fixture's) may be relabelled freely, but not given a new image.
    await core.patchNamespace({
      name: 'media',
      body: [{ op: 'add', path: '/metadata/labels/pod-security.kubernetes.io~1enforce', value: 'restricted' }],
    });
    const relabel = await rawRequest(sim, 'PATCH', '/api/v1/namespaces/media/pods/uploader', {
      token: sim.adminToken,
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: { metadata: { labels: { tier: 'upload' } } },
    });
    expect(relabel.status).toBe(200);
    const current = sim.state.store.get('pods', 'media', 'uploader')!;
    const containers = (current.spec as { containers: { name: string; image: string }[] }).containers;
    const reimage = await rawRequest(sim, 'PATCH', '/api/v1/namespaces/media/pods/uploader', {
      token: sim.adminToken,
      headers: { 'Content-Type': 'application/strategic-merge-patch+json' },
      body: { spec: { containers: [{ name: containers[0]!.name, image: 'uploader:2' }] } },
    });
    expect(reimage.status).toBe(403);
    expect(reimage.body.message).toMatch(/^pods "uploader" is forbidden: violates PodSecurity "restricted:latest": /);
  });

  it('refuses invalid labels on a namespace (422) and warns, when a stricter level is set, about the pods already there', async () => {
    const invalid = await ns('typo', { 'pod-security.kubernetes.io/enforce': 'strict' }).catch((e) => e);
    expect(apiExceptionBody(invalid)).toMatchObject({
      code: 422,
      message:
        'Namespace "typo" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted',
    });
    const labelled = await kubectl.run(['label', 'namespace', 'shop', 'pod-security.kubernetes.io/enforce=restricted']);
    expect(labelled.code, labelled.stderr).toBe(0);
    const warnings = labelled.stderr.trim().split('\n');
    expect(warnings[0]).toBe('Warning: existing pods in namespace "shop" violate the new PodSecurity enforce level "restricted:latest"');
    // one line per distinct set of reasons, naming one pod and how many others share it: the six pods of shop share one
    expect(warnings.slice(1)).toEqual([
      'Warning: cache (and 5 other pods): allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile',
    ]);
    expect(labelled.stdout).toBe('namespace/shop labeled\n');
  });

  it('evaluates an older policy version as it was: restricted v1.22 does not check runAsUser', async () => {
    await ns('legacy', { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'v1.22' });
    const root = { ...restrictedContainer, securityContext: { ...restrictedContainer.securityContext, runAsUser: 0 } };
    expect((await create('legacy', pod('root', { containers: [{ name: 'c', image: 'x', ...root }] }))).status).toBe(201);
    expect((await create('locked', pod('root', { containers: [{ name: 'c', image: 'x', ...root }] }))).body.message).toBe(
      'pods "root" is forbidden: violates PodSecurity "restricted:latest": runAsUser=0 (container "c" must not set runAsUser=0)',
    );
  });
});
