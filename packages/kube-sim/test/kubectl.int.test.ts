import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pvbCrdPath, type Simulator, startSimulator } from '../src/index.js';

const run = promisify(execFile);

describe('kubectl against the simulator', () => {
  let sim: Simulator;
  let home: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    sim = await startSimulator({ materializeVolumes: 'none' });
    home = mkdtempSync(join(tmpdir(), 'kube-sim-kubectl-'));
    // A private HOME and cache dir so kubectl's discovery cache never leaks between runs.
    env = { PATH: process.env.PATH, HOME: home, KUBECONFIG: sim.kubeconfigPath };
  });
  afterAll(async () => {
    await sim?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const kubectl = async (...args: string[]) => {
    const { stdout } = await run('kubectl', ['--cache-dir', join(home, 'cache'), ...args], { env, timeout: 20_000 });
    return stdout;
  };

  it('get pods -A prints every pod with its namespace', async () => {
    const out = await kubectl('get', 'pods', '-A');
    const rows = out.trim().split('\n');
    expect(rows[0]).toMatch(/^NAMESPACE\s+NAME\s+/);
    expect(rows.slice(1).map((r) => r.split(/\s+/).slice(0, 2).join('/'))).toEqual([
      'media/thumbnailer',
      'media/uploader',
      'shop/cache',
      'shop/postgres-0',
      'shop/reporter',
      'shop/web-7d4b9c8f6-2xk9p',
      'shop/web-7d4b9c8f6-8hq4t',
      'shop/web-7d4b9c8f6-zr5mw',
    ]);
  });

  it('get pods -l ... -o json returns the matching pods', async () => {
    const out = await kubectl('get', 'pods', '-n', 'shop', '-l', 'app in (web),pod-template-hash', '-o', 'json');
    const list = JSON.parse(out) as { items: { metadata: { name: string }; spec: { nodeName: string } }[] };
    expect(list.items.map((p) => p.spec.nodeName)).toEqual(['node-a', 'node-b', 'node-c']);
  });

  it('apply -f a CRD, then create and get its custom resources', async () => {
    const crdFile = join(home, 'widgets-crd.yaml');
    writeFileSync(
      crdFile,
      `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: widgets.example.com }
spec:
  group: example.com
  scope: Namespaced
  names: { kind: Widget, plural: widgets, singular: widget, listKind: WidgetList, shortNames: [wdg] }
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: { type: integer, minimum: 1 }
`,
    );
    // No --validate=false: kubectl reads the OpenAPI v3 documents and validates on the server.
    expect(await kubectl('apply', '-f', crdFile)).toMatch(/widgets.example.com created/);
    expect(await kubectl('apply', '-f', pvbCrdPath)).toMatch(/podvolumebackups.stowage.dev (created|configured|unchanged)/);
    const widget = join(home, 'widget.yaml');
    writeFileSync(
      widget,
      'apiVersion: example.com/v1\nkind: Widget\nmetadata: { name: w1, namespace: shop }\nspec: { size: 3, unknownField: dropped }\n',
    );
    // kubectl asks for strict field validation: the unknown field is refused, naming it...
    await expect(kubectl('apply', '-f', widget)).rejects.toThrow(/strict decoding error: unknown field "spec.unknownField"/);
    // ...and pruned when validation is turned off, as a real API server does.
    expect(await kubectl('apply', '--validate=false', '-f', widget)).toMatch(/widget.example.com\/w1 created/);
    const listed = await kubectl('get', 'wdg', '-n', 'shop');
    expect(listed).toMatch(/^NAME\s+AGE\s*\nw1\s+/);
    const json = JSON.parse(await kubectl('get', 'widgets.example.com', 'w1', '-n', 'shop', '-o', 'json')) as {
      spec: Record<string, unknown>;
    };
    expect(json.spec).toEqual({ size: 3 });
    // Re-applying a change goes through kubectl's patch path.
    writeFileSync(widget, 'apiVersion: example.com/v1\nkind: Widget\nmetadata: { name: w1, namespace: shop }\nspec: { size: 5 }\n');
    expect(await kubectl('apply', '-f', widget)).toMatch(/configured/);
    expect(await kubectl('get', 'widget', 'w1', '-n', 'shop', '-o', 'jsonpath={.spec.size}')).toBe('5');
  });

  it('get prints a CRD’s additionalPrinterColumns as the API server’s Table; -A adds the namespace, -o wide the priority 1 columns', async () => {
    const crdFile = join(home, 'gadgets-crd.yaml');
    writeFileSync(
      crdFile,
      `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: gadgets.example.com }
spec:
  group: example.com
  scope: Namespaced
  names: { kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList }
  versions:
    - name: v1
      served: true
      storage: true
      subresources: { status: {} }
      additionalPrinterColumns:
        - { name: Phase, type: string, jsonPath: .status.phase }
        - { name: Progress, type: string, jsonPath: .status.progress.summary }
        - { name: Errors, type: integer, jsonPath: .status.errors }
        - { name: Age, type: date, jsonPath: .metadata.creationTimestamp }
        - { name: Owner, type: string, jsonPath: .spec.owner, priority: 1 }
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: { type: object, properties: { owner: { type: string } } }
            status:
              type: object
              properties:
                phase: { type: string }
                errors: { type: integer }
                progress: { type: object, properties: { summary: { type: string } } }
`,
    );
    await kubectl('apply', '-f', crdFile);
    for (const [ns, name] of [
      ['shop', 'g1'],
      ['media', 'g2'],
    ] as const) {
      const created = await fetch(`${sim.url}/apis/example.com/v1/namespaces/${ns}/gadgets`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${sim.adminToken}` },
        body: JSON.stringify({ metadata: { name }, spec: { owner: `team-${ns}` } }),
      });
      expect(created.status).toBe(201);
    }
    const status = await fetch(`${sim.url}/apis/example.com/v1/namespaces/shop/gadgets/g1/status`, {
      method: 'PATCH',
      headers: { 'Content-Type': 'application/merge-patch+json', Authorization: `Bearer ${sim.adminToken}` },
      body: JSON.stringify({ status: { phase: 'InProgress', errors: 2, progress: { summary: '37/120' } } }),
    });
    expect(status.status).toBe(200);

    const rows = (await kubectl('get', 'gadgets', '-A')).trim().split('\n');
    expect(rows[0]?.split(/\s+/)).toEqual(['NAMESPACE', 'NAME', 'PHASE', 'PROGRESS', 'ERRORS', 'AGE']);
    // a column without a value is an empty cell (kube-apiserver sends null, kubectl prints nothing)
    expect(rows[1]).toMatch(/^media\s+g2\s+\d+s$/);
    expect(rows[2]?.split(/\s+/)).toEqual(['shop', 'g1', 'InProgress', '37/120', '2', expect.stringMatching(/^\d+s$/)]);
    const wide = (await kubectl('get', 'gadget', 'g1', '-n', 'shop', '-o', 'wide')).trim().split('\n');
    expect(wide[0]?.split(/\s+/)).toEqual(['NAME', 'PHASE', 'PROGRESS', 'ERRORS', 'AGE', 'OWNER']);
    expect(wide[1]?.split(/\s+/)).toEqual(['g1', 'InProgress', '37/120', '2', expect.stringMatching(/^\d+s$/), 'team-shop']);
    // get -w: every change arrives as a row of the same columns
    const child = spawn('kubectl', ['--cache-dir', join(home, 'cache'), 'get', 'gadgets', '-n', 'shop', '-w'], { env });
    try {
      let output = '';
      child.stdout.on('data', (d: Buffer) => {
        output += d.toString();
      });
      const until = async (pattern: RegExp) => {
        for (let waited = 0; !pattern.test(output); waited += 50) {
          if (waited > 15_000) throw new Error(`kubectl get -w did not print ${pattern}; got:\n${output}`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      };
      await until(/g1\s+InProgress/);
      await fetch(`${sim.url}/apis/example.com/v1/namespaces/shop/gadgets/g1/status`, {
        method: 'PATCH',
        headers: { 'Content-Type': 'application/merge-patch+json', Authorization: `Bearer ${sim.adminToken}` },
        body: JSON.stringify({ status: { phase: 'Completed', progress: { summary: '120/120' } } }),
      });
      await until(/g1\s+Completed\s+120\/120\s+2\s+\d+s/);
      expect(output.match(/^NAME\s+PHASE/gm)).toHaveLength(1);
    } finally {
      child.kill();
    }
    // -o json still gets the objects, not the table
    const json = JSON.parse(await kubectl('get', 'gadgets', '-n', 'shop', '-o', 'json')) as { items: { status: unknown }[] };
    expect(json.items[0]?.status).toEqual({ phase: 'Completed', errors: 2, progress: { summary: '120/120' } });
  });

  it('apply of a built-in kind validates without --validate=false, then re-applies a change as a patch', async () => {
    const file = join(home, 'settings.yaml');
    writeFileSync(file, 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: applied, namespace: shop }\ndata: { mode: a }\n');
    expect(await kubectl('apply', '-f', file)).toMatch(/configmap\/applied created/);
    writeFileSync(file, 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: applied, namespace: shop }\ndata: { mode: b }\n');
    expect(await kubectl('apply', '-f', file)).toMatch(/configmap\/applied configured/);
    expect(await kubectl('get', 'configmap', 'applied', '-n', 'shop', '-o', 'jsonpath={.data.mode}')).toBe('b');
  });

  it('get -w streams an event for an object created afterwards', async () => {
    const child = spawn(
      'kubectl',
      ['--cache-dir', join(home, 'cache'), 'get', 'configmaps', '-n', 'media', '-w', '--output-watch-events'],
      { env },
    );
    try {
      let output = '';
      child.stdout.on('data', (d: Buffer) => {
        output += d.toString();
      });
      const waitForText = (text: string) =>
        new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`kubectl get -w did not print ${text}; got:\n${output}`)), 15_000);
          const check = () => {
            if (output.includes(text)) {
              clearTimeout(timer);
              child.stdout.off('data', check);
              resolve();
            }
          };
          child.stdout.on('data', check);
          check();
        });
      await waitForText('media-settings');
      const created = await fetch(`${sim.url}/api/v1/namespaces/media/configmaps`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${sim.adminToken}` },
        body: JSON.stringify({ metadata: { name: 'watched-cm' }, data: { a: 'b' } }),
      });
      expect(created.status).toBe(201);
      await waitForText('watched-cm');
      expect(output).toMatch(/ADDED\s+watched-cm/);
      expect(sim.requests().watches.byResource.configmaps).toBeGreaterThanOrEqual(1);
    } finally {
      child.kill('SIGTERM');
    }
  });
});
