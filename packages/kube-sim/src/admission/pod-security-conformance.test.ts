/**
 * The Pod Security Standards' check cases, translated (facts carried over, our code): the tables of
 * staging/src/k8s.io/pod-security-admission/policy/check_*_test.go, each case with its upstream name
 * and the version of the check it calls. Cases of checks or versions newer than 1.32 (the
 * simulator's `latest`) are left out: hostProbesAndHostLifecycle (1.34), procMount_restricted and the
 * user-namespace relaxations of procMount, runAsNonRoot and runAsUser (1.35), sysctls 1.37.
 */
import { describe, expect, it } from 'vitest';
import { checkAt, evaluatePod, forbiddenDetail } from './pod-security-checks.js';

type Pod = { metadata?: { annotations?: Record<string, string> }; spec?: Record<string, unknown> };
interface Case {
  name: string;
  pod: Pod;
  /** Omitted: the check allows the pod. */
  reason?: string;
  detail?: string;
}

function table(id: string, minor: number, cases: Case[]) {
  describe(`${id} (${minor === 0 ? '1.0' : `1.${minor}`})`, () => {
    for (const c of cases)
      it(c.name, () => {
        const result = checkAt(id, minor)!(c.pod.metadata ?? {}, c.pod.spec ?? {});
        if (c.reason === undefined) expect(result.allowed).toBe(true);
        else
          expect({ allowed: result.allowed, reason: result.reason, detail: result.detail ?? '' }).toEqual({
            allowed: false,
            reason: c.reason,
            detail: c.detail ?? '',
          });
      });
  });
}

const sc = (securityContext: Record<string, unknown> | null, name: string) =>
  securityContext === null ? { name } : { name, securityContext };

const escalationContainers = [
  { name: 'a' },
  sc({}, 'b'),
  sc({ allowPrivilegeEscalation: true }, 'c'),
  sc({ allowPrivilegeEscalation: false }, 'd'),
];
table('allowPrivilegeEscalation', 25, [
  {
    name: 'multiple containers',
    pod: { spec: { containers: escalationContainers } },
    reason: 'allowPrivilegeEscalation != false',
    detail: 'containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false',
  },
  {
    name: 'windows pod, admit without checking privilegeEscalation',
    pod: { spec: { os: { name: 'windows' }, containers: [{ name: 'a' }] } },
  },
  {
    name: 'linux pod, reject if security context is not set',
    pod: { spec: { os: { name: 'linux' }, containers: [{ name: 'a' }] } },
    reason: 'allowPrivilegeEscalation != false',
    detail: 'container "a" must set securityContext.allowPrivilegeEscalation=false',
  },
]);
table('allowPrivilegeEscalation', 8, [
  {
    name: 'multiple containers',
    pod: { spec: { containers: escalationContainers } },
    reason: 'allowPrivilegeEscalation != false',
    detail: 'containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false',
  },
]);

const apparmor = 'container.apparmor.security.beta.kubernetes.io/';
table('appArmorProfile', 0, [
  {
    name: 'container with default AppArmor + extra annotations',
    pod: { metadata: { annotations: { [`${apparmor}test`]: 'runtime/default', env: 'prod' } } },
  },
  {
    name: 'container with local AppArmor + extra annotations',
    pod: { metadata: { annotations: { [`${apparmor}test`]: 'localhost/sec-profile01', env: 'dev' } } },
  },
  { name: 'container with no AppArmor annotations', pod: { metadata: { annotations: { env: 'dev' } } } },
  { name: 'container with no annotations', pod: {} },
  { name: 'pod with runtime default', pod: { spec: { securityContext: { appArmorProfile: { type: 'RuntimeDefault' } } } } },
  { name: 'container with localhost profile', pod: { spec: { containers: [sc({ appArmorProfile: { type: 'RuntimeDefault' } }, 'foo')] } } },
  {
    name: 'unconfined pod',
    pod: { spec: { securityContext: { appArmorProfile: { type: 'Unconfined' } } } },
    reason: 'forbidden AppArmor profile',
    detail: 'pod must not set AppArmor profile type to "Unconfined"',
  },
  {
    name: 'unconfined container',
    pod: {
      spec: {
        securityContext: { appArmorProfile: { type: 'RuntimeDefault' } },
        containers: [sc({ appArmorProfile: { type: 'Unconfined' } }, 'foo')],
      },
    },
    reason: 'forbidden AppArmor profile',
    detail: 'container "foo" must not set AppArmor profile type to "Unconfined"',
  },
  {
    name: 'unconfined init container',
    pod: {
      spec: {
        securityContext: { appArmorProfile: { type: 'RuntimeDefault' } },
        containers: [{ name: 'foo' }],
        initContainers: [sc({ appArmorProfile: { type: 'Unconfined' } }, 'bar')],
      },
    },
    reason: 'forbidden AppArmor profile',
    detail: 'container "bar" must not set AppArmor profile type to "Unconfined"',
  },
  {
    name: 'multiple containers',
    pod: {
      metadata: {
        annotations: {
          [apparmor]: 'bogus',
          [`${apparmor}a`]: '',
          [`${apparmor}b`]: 'runtime/default',
          [`${apparmor}c`]: 'localhost/',
          [`${apparmor}d`]: 'localhost/foo',
          [`${apparmor}e`]: 'unconfined',
          [`${apparmor}f`]: 'unknown',
        },
      },
    },
    reason: 'forbidden AppArmor profiles',
    detail: `annotations must not set AppArmor profile type to "${apparmor}="bogus"", "${apparmor}e="unconfined"", "${apparmor}f="unknown""`,
  },
]);

table('capabilities_baseline', 0, [
  {
    name: 'multiple containers',
    pod: { spec: { containers: [sc({ capabilities: { add: ['FOO', 'BAR'] } }, 'a'), sc({ capabilities: { add: ['BAR', 'BAZ'] } }, 'b')] } },
    reason: 'non-default capabilities',
    detail: 'containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add',
  },
]);

const capabilityContainers = [
  sc({ capabilities: { add: ['FOO', 'BAR'] } }, 'a'),
  sc({ capabilities: { add: ['BAR', 'BAZ'] } }, 'b'),
  sc({ capabilities: { add: ['NET_BIND_SERVICE', 'CHOWN'], drop: ['ALL', 'FOO'] } }, 'c'),
];
const capabilitiesDetail =
  'containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add';
table('capabilities_restricted', 25, [
  {
    name: 'multiple containers',
    pod: { spec: { containers: capabilityContainers } },
    reason: 'unrestricted capabilities',
    detail: capabilitiesDetail,
  },
  { name: 'windows pod, admit without checking capabilities', pod: { spec: { os: { name: 'windows' }, containers: [{ name: 'a' }] } } },
  {
    name: 'linux pod, reject if security context is not set',
    pod: { spec: { os: { name: 'linux' }, containers: [{ name: 'a' }] } },
    reason: 'unrestricted capabilities',
    detail: 'container "a" must set securityContext.capabilities.drop=["ALL"]',
  },
]);
table('capabilities_restricted', 22, [
  {
    name: 'multiple containers',
    pod: { spec: { containers: capabilityContainers } },
    reason: 'unrestricted capabilities',
    detail: capabilitiesDetail,
  },
]);

table('hostNamespaces', 0, [
  {
    name: 'multiple host namespaces',
    pod: { spec: { hostNetwork: true, hostIPC: true, hostPID: true } },
    reason: 'host namespaces',
    detail: 'hostNetwork=true, hostPID=true, hostIPC=true',
  },
]);

table('hostPathVolumes', 0, [
  {
    name: 'host path volumes',
    pod: {
      spec: {
        volumes: [
          { name: 'a', hostPath: {} },
          { name: 'b', hostPath: {} },
          { name: 'c', emptyDir: {} },
        ],
      },
    },
    reason: 'hostPath volumes',
    detail: 'volumes "a", "b"',
  },
]);

const ports = (name: string, ...hostPorts: number[]) => ({ name, ports: hostPorts.map((hostPort) => ({ hostPort })) });
table('hostPorts', 0, [
  {
    name: 'one container, one host port',
    pod: { spec: { containers: [ports('a', 0), ports('b', 0, 20)] } },
    reason: 'hostPort',
    detail: 'container "b" uses hostPort 20',
  },
  {
    name: 'multiple containers, multiple host port',
    pod: { spec: { containers: [ports('a', 0), ports('b', 0, 10, 20), ports('c', 0, 10, 30)] } },
    reason: 'hostPort',
    detail: 'containers "b", "c" use hostPorts 10, 20, 30',
  },
]);

table('privileged', 0, [
  {
    name: 'privileged',
    pod: {
      spec: {
        containers: [
          { name: 'a' },
          sc({}, 'b'),
          sc({ privileged: false }, 'c'),
          sc({ privileged: true }, 'd'),
          sc({ privileged: true }, 'e'),
        ],
      },
    },
    reason: 'privileged',
    detail: 'containers "d", "e" must not set securityContext.privileged=true',
  },
]);

table('procMount', 0, [
  {
    name: 'procMount',
    pod: {
      spec: {
        containers: [
          { name: 'a' },
          sc({}, 'b'),
          sc({ procMount: 'Default' }, 'c'),
          sc({ procMount: 'Unmasked' }, 'd'),
          sc({ procMount: 'other' }, 'e'),
        ],
        hostUsers: true,
      },
    },
    reason: 'procMount',
    detail: 'containers "d", "e" must not set securityContext.procMount to "Unmasked", "other"',
  },
]);

const allowedVolumes = [
  'emptyDir',
  'secret',
  'persistentVolumeClaim',
  'downwardAPI',
  'configMap',
  'projected',
  'csi',
  'ephemeral',
  'image',
];
const restrictedVolumes = [
  'hostPath',
  'gcePersistentDisk',
  'awsElasticBlockStore',
  'gitRepo',
  'nfs',
  'iscsi',
  'glusterfs',
  'rbd',
  'flexVolume',
  'cinder',
  'cephfs',
  'flocker',
  'fc',
  'azureFile',
  'vsphereVolume',
  'quobyte',
  'azureDisk',
  'photonPersistentDisk',
  'portworxVolume',
  'scaleIO',
  'storageos',
];
table('restrictedVolumes', 0, [
  {
    name: 'host path volumes',
    pod: {
      spec: {
        volumes: [
          ...allowedVolumes.map((source, i) => ({ name: `a${i + 1}`, [source]: {} })),
          ...restrictedVolumes.map((source, i) => ({ name: `b${i + 1}`, [source]: {} })),
          // A volume with no source at all: of an unknown type (the API server defaults it to an emptyDir first).
          { name: 'c1' },
        ],
      },
    },
    reason: 'restricted volume types',
    detail:
      'volumes ' +
      '"b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10", "b11", "b12", "b13", "b14", "b15", "b16", "b17", "b18", "b19", "b20", "b21", "c1"' +
      ' use restricted volume types ' +
      '"awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs", ' +
      '"hostPath", "iscsi", "nfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "unknown", "vsphereVolume"',
  },
]);

table('runAsNonRoot', 0, [
  {
    name: 'no explicit runAsNonRoot',
    pod: { spec: { containers: [{ name: 'a' }] } },
    reason: 'runAsNonRoot != true',
    detail: 'pod or container "a" must set securityContext.runAsNonRoot=true',
  },
  {
    name: 'pod runAsNonRoot=false',
    pod: { spec: { securityContext: { runAsNonRoot: false }, containers: [{ name: 'a' }] } },
    reason: 'runAsNonRoot != true',
    detail: 'pod must not set securityContext.runAsNonRoot=false',
  },
  {
    name: 'containers runAsNonRoot=false',
    pod: {
      spec: {
        securityContext: { runAsNonRoot: true },
        containers: [
          { name: 'a' },
          sc({}, 'b'),
          sc({ runAsNonRoot: false }, 'c'),
          sc({ runAsNonRoot: false }, 'd'),
          sc({ runAsNonRoot: true }, 'e'),
          sc({ runAsNonRoot: true }, 'f'),
        ],
      },
    },
    reason: 'runAsNonRoot != true',
    detail: 'containers "c", "d" must not set securityContext.runAsNonRoot=false',
  },
  {
    name: 'pod nil, container fallthrough',
    pod: { spec: { containers: [{ name: 'a' }, sc({}, 'b'), sc({ runAsNonRoot: true }, 'd'), sc({ runAsNonRoot: true }, 'e')] } },
    reason: 'runAsNonRoot != true',
    detail: 'pod or containers "a", "b" must set securityContext.runAsNonRoot=true',
  },
]);

table('runAsUser', 23, [
  {
    name: 'pod runAsUser=0',
    pod: { spec: { securityContext: { runAsUser: 0 }, containers: [{ name: 'a' }] } },
    reason: 'runAsUser=0',
    detail: 'pod must not set runAsUser=0',
  },
  { name: 'pod runAsUser=non-zero', pod: { spec: { securityContext: { runAsUser: 1000 }, containers: [{ name: 'a' }] } } },
  { name: 'pod runAsUser=nil', pod: { spec: { securityContext: {}, containers: [{ name: 'a' }] } } },
  {
    name: 'containers runAsUser=0',
    pod: {
      spec: {
        securityContext: { runAsUser: 1000 },
        containers: [
          { name: 'a' },
          sc({}, 'b'),
          sc({ runAsUser: 0 }, 'c'),
          sc({ runAsUser: 0 }, 'd'),
          sc({ runAsUser: 1 }, 'e'),
          sc({ runAsUser: 1 }, 'f'),
        ],
      },
    },
    reason: 'runAsUser=0',
    detail: 'containers "c", "d" must not set runAsUser=0',
  },
  {
    name: 'containers runAsUser=non-zero',
    pod: {
      spec: { containers: [sc({ runAsUser: 1 }, 'c'), sc({ runAsUser: 2 }, 'd'), sc({ runAsUser: 3 }, 'e'), sc({ runAsUser: 4 }, 'f')] },
    },
  },
]);

const seLinuxGood = [
  sc({ seLinuxOptions: { type: 'container_t' } }, 'a'),
  sc({ seLinuxOptions: { type: 'container_init_t' } }, 'b'),
  sc({ seLinuxOptions: { type: 'container_kvm_t' } }, 'c'),
  sc({ seLinuxOptions: { type: 'container_engine_t' } }, 'd'),
];
const seLinuxBad = [
  sc({ seLinuxOptions: { type: 'bar' } }, 'e'),
  sc({ seLinuxOptions: { user: 'bar' } }, 'f'),
  sc({ seLinuxOptions: { role: 'baz' } }, 'g'),
];
table('seLinuxOptions', 31, [
  {
    name: 'invalid pod and containers',
    pod: {
      spec: { securityContext: { seLinuxOptions: { type: 'foo', user: 'bar', role: 'baz' } }, containers: [...seLinuxGood, ...seLinuxBad] },
    },
    reason: 'seLinuxOptions',
    detail:
      'pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set',
  },
  {
    name: 'invalid pod',
    pod: { spec: { securityContext: { seLinuxOptions: { type: 'foo', user: 'bar', role: 'baz' } }, containers: seLinuxGood } },
    reason: 'seLinuxOptions',
    detail: 'pod set forbidden securityContext.seLinuxOptions: type "foo"; user may not be set; role may not be set',
  },
  {
    name: 'invalid containers',
    pod: { spec: { securityContext: { seLinuxOptions: {} }, containers: [...seLinuxGood, ...seLinuxBad] } },
    reason: 'seLinuxOptions',
    detail: 'containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: type "bar"; user may not be set; role may not be set',
  },
  {
    name: 'bad type',
    pod: { spec: { securityContext: { seLinuxOptions: { type: 'bad' } } } },
    reason: 'seLinuxOptions',
    detail: 'pod set forbidden securityContext.seLinuxOptions: type "bad"',
  },
  {
    name: 'bad user',
    pod: { spec: { securityContext: { seLinuxOptions: { user: 'bad' } } } },
    reason: 'seLinuxOptions',
    detail: 'pod set forbidden securityContext.seLinuxOptions: user may not be set',
  },
  {
    name: 'bad role',
    pod: { spec: { securityContext: { seLinuxOptions: { role: 'bad' } } } },
    reason: 'seLinuxOptions',
    detail: 'pod set forbidden securityContext.seLinuxOptions: role may not be set',
  },
]);

const seccompPodAnnotation = 'seccomp.security.alpha.kubernetes.io/pod';
const seccompContainer = 'container.seccomp.security.alpha.kubernetes.io/';
table('seccompProfile_baseline', 0, [
  {
    name: 'pod seccomp invalid',
    pod: { metadata: { annotations: { [seccompPodAnnotation]: 'unconfined' } } },
    reason: 'seccompProfile',
    detail: `forbidden annotation ${seccompPodAnnotation}="unconfined"`,
  },
  {
    name: 'containers seccomp invalid',
    pod: {
      metadata: { annotations: { [`${seccompContainer}a`]: 'unconfined', [`${seccompContainer}b`]: 'unknown' } },
      spec: { containers: [{ name: 'a' }, { name: 'b' }, { name: 'c' }] },
    },
    reason: 'seccompProfile',
    detail: `forbidden annotations ${seccompContainer}a="unconfined", ${seccompContainer}b="unknown"`,
  },
  {
    name: 'pod and containers seccomp invalid',
    pod: {
      metadata: {
        annotations: { [seccompPodAnnotation]: 'unconfined', [`${seccompContainer}a`]: 'unconfined', [`${seccompContainer}b`]: 'unknown' },
      },
      spec: { containers: [{ name: 'a' }, { name: 'b' }, { name: 'c' }] },
    },
    reason: 'seccompProfile',
    detail: `forbidden annotations ${seccompContainer}a="unconfined", ${seccompContainer}b="unknown", ${seccompPodAnnotation}="unconfined"`,
  },
]);

const seccompContainers = [
  { name: 'a' },
  sc({}, 'b'),
  sc({ seccompProfile: { type: 'Unconfined' } }, 'c'),
  sc({ seccompProfile: { type: 'Unconfined' } }, 'd'),
  sc({ seccompProfile: { type: 'RuntimeDefault' } }, 'e'),
  sc({ seccompProfile: { type: 'RuntimeDefault' } }, 'f'),
];
const seccompCommon: Case[] = [
  {
    name: 'pod seccomp invalid',
    pod: { spec: { securityContext: { seccompProfile: { type: 'Unconfined' } }, containers: [{ name: 'a' }] } },
    reason: 'seccompProfile',
    detail: 'pod must not set securityContext.seccompProfile.type to "Unconfined"',
  },
  {
    name: 'containers seccomp invalid',
    pod: { spec: { securityContext: { seccompProfile: { type: 'RuntimeDefault' } }, containers: seccompContainers } },
    reason: 'seccompProfile',
    detail: 'containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"',
  },
];
table('seccompProfile_baseline', 19, [
  ...seccompCommon,
  {
    name: 'pod and containers seccomp invalid',
    pod: { spec: { securityContext: { seccompProfile: { type: 'Unconfined' } }, containers: seccompContainers } },
    reason: 'seccompProfile',
    detail: 'pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"',
  },
]);
const seccompRestricted: Case[] = [
  {
    name: 'no explicit seccomp',
    pod: { spec: { containers: [{ name: 'a' }] } },
    reason: 'seccompProfile',
    detail: 'pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"',
  },
  ...seccompCommon,
  {
    name: 'pod nil, container fallthrough',
    pod: {
      spec: {
        containers: [
          { name: 'a' },
          sc({}, 'b'),
          sc({ seccompProfile: { type: 'RuntimeDefault' } }, 'd'),
          sc({ seccompProfile: { type: 'RuntimeDefault' } }, 'e'),
        ],
      },
    },
    reason: 'seccompProfile',
    detail: 'pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"',
  },
];
table('seccompProfile_restricted', 25, [
  ...seccompRestricted,
  { name: 'no explicit seccomp, windows Pod', pod: { spec: { os: { name: 'windows' }, containers: [{ name: 'a' }] } } },
  {
    name: 'no explicit seccomp, linux pod',
    pod: { spec: { os: { name: 'linux' }, containers: [{ name: 'a' }] } },
    reason: 'seccompProfile',
    detail: 'pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"',
  },
]);
table('seccompProfile_restricted', 19, seccompRestricted);

const sysctl = (...names: string[]) => ({ spec: { securityContext: { sysctls: names.map((name) => ({ name, value: '1' })) } } });
const forbiddenAB: Case = { name: 'forbidden sysctls', pod: sysctl('a', 'b'), reason: 'forbidden sysctls', detail: 'a, b' };
const later = (names: string[], allowed: boolean, prefix: string): Case[] =>
  names.map((name) =>
    allowed
      ? { name: `${prefix}: ${name}`, pod: sysctl(name) }
      : { name: `${prefix}: ${name}`, pod: sysctl(name), reason: 'forbidden sysctls', detail: name },
  );
const in27 = ['net.ipv4.ip_local_reserved_ports'];
const in29 = ['net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes'];
const in32 = ['net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem'];
table('sysctls', 0, [forbiddenAB, ...later([...in27, ...in29, ...in32], false, 'new supported sysctls not supported')]);
table('sysctls', 27, [forbiddenAB, ...later(in27, true, 'new supported sysctls')]);
table('sysctls', 29, [forbiddenAB, ...later(in29, true, 'new supported sysctls')]);
table('sysctls', 32, [forbiddenAB, ...later(in32, true, 'new supported sysctls')]);

table('windowsHostProcess', 0, [
  {
    name: 'host process',
    pod: {
      spec: {
        securityContext: { windowsOptions: { hostProcess: true } },
        containers: [
          { name: 'a' },
          sc({}, 'b'),
          sc({ windowsOptions: {} }, 'c'),
          sc({ windowsOptions: { hostProcess: false } }, 'd'),
          sc({ windowsOptions: { hostProcess: true } }, 'e'),
          sc({ windowsOptions: { hostProcess: true } }, 'f'),
        ],
      },
    },
    reason: 'hostProcess',
    detail: 'pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true',
  },
]);

describe('levels: restricted runs the baseline checks it does not override, in the standard order', () => {
  const spec = {
    hostNetwork: true,
    volumes: [{ name: 'host', hostPath: { path: '/' } }],
    containers: [{ name: 'c', securityContext: { privileged: true, capabilities: { add: ['SYS_ADMIN'] } } }],
  };
  it('baseline names host namespaces, privileged, capabilities and hostPath', () => {
    expect(forbiddenDetail(evaluatePod('baseline', 'latest', {}, spec))).toBe(
      'non-default capabilities (container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add), host namespaces (hostNetwork=true), ' +
        'hostPath volumes (volume "host"), privileged (container "c" must not set securityContext.privileged=true)',
    );
  });
  it('restricted replaces hostPath by restricted volume types and capabilities by unrestricted capabilities', () => {
    expect(forbiddenDetail(evaluatePod('restricted', 'latest', {}, spec))).toBe(
      'host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true), ' +
        'allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), ' +
        'unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]; container "c" must not include "SYS_ADMIN" in securityContext.capabilities.add), ' +
        'restricted volume types (volume "host" uses restricted volume type "hostPath"), ' +
        'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), ' +
        'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
    );
  });
  it('an older version runs the checks of its time: restricted v1.21 has no runAsUser, and capabilities stay baseline', () => {
    const rootPod = { containers: [{ name: 'c', securityContext: { runAsUser: 0, runAsNonRoot: true, allowPrivilegeEscalation: false } }] };
    expect(evaluatePod('restricted', 21, {}, rootPod).map((r) => r.reason)).toEqual(['seccompProfile']);
    expect(evaluatePod('restricted', 'latest', {}, rootPod).map((r) => r.reason)).toEqual([
      'unrestricted capabilities',
      'runAsUser=0',
      'seccompProfile',
    ]);
    expect(evaluatePod('privileged', 'latest', {}, rootPod)).toEqual([]);
  });
});
