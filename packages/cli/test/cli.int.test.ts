import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { getFreePort } from '@stowage/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_KEY, runStowage, type Stack, startStack, TOKEN } from './cli-harness.js';

let stack: Stack;
let work: string;

beforeAll(async () => {
  stack = await startStack();
  work = await mkdtemp(join(tmpdir(), 'stowage-cli-test-'));
}, 60_000);

afterAll(async () => {
  await stack?.close();
  if (work) await rm(work, { recursive: true, force: true });
}, 60_000);

const stowage = (...args: string[]) => runStowage(args, stack.env);

async function treeDigest(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile())
        out[relative(dir, p)] = createHash('sha256')
          .update(await readFile(p))
          .digest('hex');
    }
  };
  await walk(dir);
  return out;
}

describe('stowage backup against a running API', { timeout: 120_000 }, () => {
  it('creates from a YAML file with --wait, showing progress and the final state; describe shows blocks, PVBs and hook runs', async () => {
    const file = join(work, 'shop.yaml');
    await writeFile(
      file,
      [
        'apiVersion: velero.io/v1',
        'kind: Backup',
        'metadata:',
        '  name: shop-from-file',
        'spec:',
        '  includedNamespaces: [shop]',
        '  defaultVolumesToFsBackup: true',
        '',
      ].join('\n'),
    );
    const created = await stowage('backup', 'create', '-f', file, '--wait');
    expect(created.stderr).toBe('');
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain('backup "shop-from-file" submitted');
    expect(created.stdout).toMatch(/phase InProgress → Finalizing/); // the live progress (plain lines: not a TTY)
    expect(created.stdout).toMatch(/post hook shop\/postgres-0\/postgres ok \(exit 0\)/);
    expect(created.stdout).toMatch(/Phase: +Completed/);

    const described = await stowage('backup', 'describe', 'shop-from-file');
    expect(described.code).toBe(0);
    const text = described.stdout;
    expect(text).toMatch(/includedNamespaces:\s*\n\s*- shop/);
    // Durations read as a Velero user writes them, not as stored milliseconds.
    expect(text).toMatch(/^ +fsBackupTimeout: 4h0m0s$/m);
    expect(text).toMatch(/^ +ttl: 720h0m0s$/m);
    expect(text).not.toMatch(/TimeoutMs|ttlMs/);
    expect(text).toMatch(/Blocks \(\d+\):/);
    // One PVB per fs-backup volume of the shop pods (postgres data, cache emptyDir, reporter PVC; scratch is excluded).
    expect(text).toContain('Pod volume backups (3):');
    expect(text).toMatch(/shop\/postgres-0 +data +node-a +Completed +\d/);
    expect(text).toMatch(/shop\/cache +redis-data +node-b +Completed/);
    expect(text).not.toMatch(/scratch/);
    expect(text).toContain('Hook runs (2):');
    expect(text).toMatch(/shop\/postgres-0 +postgres +pre +exited +0 /);
    expect(text).toMatch(/shop\/postgres-0 +postgres +post +exited +0 /);

    const json = await stowage('backup', 'describe', 'shop-from-file', '--json');
    const { report } = JSON.parse(json.stdout) as {
      report: { phase: string; pvbs: { total: number }; postHookLags: Array<{ lagMs: number | null }> };
    };
    expect(report.phase).toBe('Completed');
    expect(report.pvbs.total).toBe(3);
    expect(report.postHookLags).toHaveLength(1);
    expect(report.postHookLags[0]?.lagMs).toBeGreaterThanOrEqual(0);
  });

  it('creates from flags (--json), then follows it with wait; get, list and logs show it', async () => {
    const created = await stowage(
      'backup',
      'create',
      'media-flags',
      '--include-namespaces',
      'media',
      '--selector',
      'app=media',
      '--default-volumes-to-fs-backup',
      '--fs-backup-timeout',
      '1h',
      '--json',
    );
    expect(created.code, created.stderr).toBe(0);
    const body = JSON.parse(created.stdout) as { name: string; spec: Record<string, unknown> };
    expect(body.name).toBe('media-flags');
    expect(body.spec).toMatchObject({
      includedNamespaces: ['media'],
      labelSelector: { matchLabels: { app: 'media' } },
      defaultVolumesToFsBackup: true,
      fsBackupTimeout: '1h0m0s',
    });

    const waited = await stowage('backup', 'wait', 'media-flags', '--json');
    expect(waited.code).toBe(0);
    const { backup, report } = JSON.parse(waited.stdout) as { backup: { phase: string }; report: { pvbs: { total: number } } };
    expect(backup.phase).toBe('Completed');
    expect(report.pvbs.total).toBe(1); // two pods share one claim: one PVB

    const [got, gotJsonRes, listed, pageRes, logs, ndjson] = await Promise.all([
      stowage('backup', 'get', 'media-flags'),
      stowage('backup', 'get', 'media-flags', '--json'),
      stowage('backup', 'list'),
      stowage('backup', 'list', '--phase', 'Completed', '--limit', '1', '--json'),
      stowage('backup', 'logs', 'media-flags'),
      stowage('backup', 'logs', 'media-flags', '--json'),
    ]);
    // Velero's `get`: one row per backup, times local with their age.
    expect(got.stdout).toMatch(/^NAME +STATUS +ERRORS +WARNINGS +CREATED +AGE +EXPIRES +LABELS$/m);
    expect(got.stdout).toMatch(
      /^media-flags +Completed +0 +0 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d +\d+(\.\d)?s +7[12]\d?h\d+m0s +<none>$/m,
    );
    expect((JSON.parse(gotJsonRes.stdout) as { phase: string }).phase).toBe('Completed');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^NAME +STATUS +CREATED +AGE +TOOK +EXPIRES +LABELS$/m);
    expect(listed.stdout).toMatch(/media-flags +Completed/);
    const page = JSON.parse(pageRes.stdout) as { items: Array<{ name: string }>; nextCursor?: string };
    expect(page.items).toHaveLength(1);
    expect(page.nextCursor).toBeDefined();
    expect(logs.code).toBe(0);
    expect(logs.stdout).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d (INFO|WARN|ERROR|DEBUG) +\S/m);
    for (const line of ndjson.stdout.trim().split('\n')) expect(JSON.parse(line)).toHaveProperty('msg');
  });

  it('cancels a running backup (wait exits 3 with Canceled), refuses a second cancel, then deletes it', async () => {
    // The postgres pre hook is held until the cancel has been answered: the backup is still
    // running when the cancel arrives, however long the CLI takes to start on a loaded machine.
    stack.sim.setExecBehaviour('shop', 'postgres-0', {
      postgres: { rules: [{ commandContains: 'fsfreeze -f', hold: true }], default: { exitCode: 0, durationMs: 10 } },
    });
    try {
      const created = await stowage('backup', 'create', 'to-cancel', '--include-namespaces', 'shop');
      expect(created.code, created.stderr).toBe(0);
      const freezing = () =>
        stack.sim.execLog({ namespace: 'shop', pod: 'postgres-0' }).find((r) => r.command.join(' ').includes('fsfreeze -f') && !r.endedAt);
      for (const until = Date.now() + 60_000; !freezing(); await new Promise((r) => setTimeout(r, 100))) {
        if (Date.now() > until) throw new Error('the pre hook of to-cancel never started');
      }
      const canceled = await stowage('backup', 'cancel', 'to-cancel');
      expect(canceled.code, canceled.stderr).toBe(0);
      expect(canceled.stdout).toContain('cancel requested for backup "to-cancel"');
      // The hook ends now; the block creates no PVB, and the backup ends Canceled.
      expect(stack.sim.releaseExecs('shop', 'postgres-0')).toBe(1);
      const waited = await stowage('backup', 'wait', 'to-cancel');
      expect(waited.code, waited.stdout).toBe(3);
      expect(waited.stdout).toMatch(/Phase: +Canceled/);
      expect(waited.stdout).toMatch(/Cancel: +requested at/);
    } finally {
      stack.sim.setExecBehaviour('shop', 'postgres-0', undefined);
      stack.sim.releaseExecs('shop', 'postgres-0');
    }
    const again = await stowage('backup', 'cancel', 'to-cancel');
    expect(again.code).toBe(1);
    expect(again.stderr.trim()).toMatch(/^backup "to-cancel" has already ended \(phase Canceled\); nothing to cancel$/);

    // Deleting is permanent: without a terminal to ask on, only with --confirm.
    const unconfirmed = await stowage('backup', 'delete', 'to-cancel');
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr.trim()).toBe('backup delete: this cannot be undone; add --confirm (there is no terminal to ask on)');
    const deleted = await stowage('backup', 'delete', 'to-cancel', '--confirm');
    expect(deleted.code).toBe(0);
    expect(deleted.stdout).toContain('backup "to-cancel" deleted');
    const gone = await stowage('backup', 'get', 'to-cancel');
    expect(gone.code).toBe(1);
    expect(gone.stderr.trim()).toBe('backup "to-cancel" does not exist');
  });
});

describe('stowage errors: one clear line and a non-zero exit', { timeout: 120_000 }, () => {
  it('a wrong URL (nothing listening) says the API cannot be reached', async () => {
    const port = await getFreePort();
    const res = await runStowage(['backup', 'list'], { STOWAGE_API_URL: `http://127.0.0.1:${port}`, STOWAGE_API_TOKEN: TOKEN });
    expect(res.code).toBe(1);
    expect(res.stderr.trim().split('\n')).toEqual([
      `cannot reach the Stowage API at http://127.0.0.1:${port} (connection refused); is it running, and is STOWAGE_API_URL right?`,
    ]);
  });

  it('a URL that is not the Stowage API (the simulator) and a malformed URL are named as such', async () => {
    const sim = await runStowage(['backup', 'get', 'x'], { STOWAGE_API_URL: stack.sim.url, STOWAGE_API_TOKEN: TOKEN });
    expect(sim.code).toBe(1);
    expect(sim.stderr).toMatch(
      /^the server at http:\/\/127\.0\.0\.1:\d+ answered HTTP \d+ without a Stowage error body; is STOWAGE_API_URL the Stowage API\?\n$/,
    );
    const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>hello</html>'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as { port: number }).port;
    const html = await runStowage(['backup', 'list'], { STOWAGE_API_URL: `http://127.0.0.1:${port}`, STOWAGE_API_TOKEN: TOKEN });
    await new Promise<void>((r) => server.close(() => r()));
    expect(html.code).toBe(1);
    expect(html.stderr).toMatch(/answered GET \/v1\/backups with something that is not JSON; is STOWAGE_API_URL the Stowage API\?/);
    const bad = await runStowage(['backup', 'list'], { STOWAGE_API_URL: 'not a url', STOWAGE_API_TOKEN: TOKEN });
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim()).toBe('STOWAGE_API_URL "not a url" is not a URL; use e.g. http://127.0.0.1:8080');
  });

  it('a refused token and a missing token', async () => {
    const wrong = await runStowage(['backup', 'list'], { STOWAGE_API_URL: stack.apiUrl, STOWAGE_API_TOKEN: 'not-the-token' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr.trim()).toBe('the API refused the token (the bearer token is not valid); check STOWAGE_API_TOKEN');
    const none = await runStowage(['backup', 'list'], { STOWAGE_API_URL: stack.apiUrl });
    expect(none.code).toBe(1);
    expect(none.stderr.trim()).toBe('the API needs a token: set STOWAGE_API_TOKEN to one of the API tokens');
  });

  it('an unknown backup, for every command that names one', async () => {
    // One after the other: seven CLIs started at once on a loaded machine only measure the machine.
    for (const command of ['get', 'describe', 'logs', 'cancel', 'delete', 'wait', 'download']) {
      const res = await stowage('backup', command, 'no-such-backup', ...(command === 'delete' ? ['--confirm'] : []));
      expect(res.code, command).toBe(1);
      expect(res.stderr.trim(), command).toBe('backup "no-such-backup" does not exist');
    }
  });

  it('validation problems: each path with its message, nothing created', async () => {
    const res = await stowage(
      'backup',
      'create',
      'Bad_Name',
      '--include-namespaces',
      'shop,Not_A_Namespace',
      '--fs-backup-timeout',
      'soon',
    );
    expect(res.code).toBe(1);
    const lines = res.stderr.trim().split('\n');
    expect(lines[0]).toMatch(/^the API rejected the request: \d+ problems$/);
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}name: .*Bad_Name/));
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}spec\.includedNamespaces\[1\]: /));
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}spec\.fsBackupTimeout: /));
    const file = join(work, 'typo.json');
    await writeFile(file, JSON.stringify({ spec: { includedNamespace: ['shop'] } }));
    const typo = await stowage('backup', 'create', '-f', file);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toMatch(/^ {2}spec(\.includedNamespace)?: .*includedNamespaces/m);
    const listed = JSON.parse((await stowage('backup', 'list', '--json')).stdout) as { items: Array<{ name: string }> };
    expect(listed.items.map((b) => b.name)).not.toContain('Bad_Name');
  });

  it('bad command lines exit 2 and name the problem', async () => {
    const unknown = await stowage('backup', 'create', '--bogus');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim()).toBe('backup create: unknown flag --bogus; see "stowage backup create --help"');
    const noName = await stowage('backup', 'describe');
    expect(noName.code).toBe(2);
    expect(noName.stderr.trim()).toBe('backup describe: give the name, e.g. "stowage backup describe nightly"');
    const wrongFlag = await stowage('backup', 'get', 'x', '--wait');
    expect(wrongFlag.code).toBe(2);
    expect(wrongFlag.stderr.trim()).toBe('backup get: does not take --wait');
    const needsValue = await stowage('backup', 'list', '--phase');
    expect(needsValue.code).toBe(2);
    expect(needsValue.stderr.trim()).toBe('backup list: flag --phase needs a value');
    const badOutput = await stowage('backup', 'list', '-o', 'xml');
    expect(badOutput.code).toBe(2);
    expect(badOutput.stderr.trim()).toBe('backup list: flag -o/--output must be json, yaml or table, got "xml"');
    const missingFile = await stowage('backup', 'create', '-f', join(work, 'nope.yaml'));
    expect(missingFile.code).toBe(1);
    expect(missingFile.stderr.trim()).toMatch(/^cannot read the spec file .*nope\.yaml: no such file$/);
  });
});

describe('stowage repo against the repository the node agents wrote', { timeout: 120_000 }, () => {
  it('lists snapshots, restores one byte for byte and verifies; a wrong key fails clearly', async () => {
    const repoDir = join(stack.storageDir, 'repository');
    expect((await stat(repoDir)).isDirectory()).toBe(true);
    const env = { STOWAGE_REPO_KEY: REPO_KEY };
    const snaps = await runStowage(['repo', 'snapshots', '--repo', repoDir, '--json'], env);
    expect(snaps.code).toBe(0);
    const list = JSON.parse(snaps.stdout) as Array<{ id: string; tags: Record<string, string>; totals: { files: number } }>;
    expect(list.length).toBeGreaterThan(0);
    // The postgres data volume: find its snapshot by size (14 files) and compare with the source.
    const source = stack.sim.podVolumes('shop', 'postgres-0').find((v) => v.volume === 'data');
    expect(source).toBeDefined();
    const expected = await treeDigest(source!.path);
    const snapshot = list.find((s) => s.totals.files === Object.keys(expected).length);
    expect(snapshot, JSON.stringify(list)).toBeDefined();
    const target = join(work, 'restored');
    const restored = await runStowage(['repo', 'restore', '--repo', repoDir, '--snapshot', snapshot!.id, '--target', target], env);
    expect(restored.code).toBe(0);
    expect(restored.stdout).toMatch(/^restored snapshot /);
    expect(await treeDigest(target)).toEqual(expected);

    const verified = await runStowage(['repo', 'verify', '--repo', repoDir], env);
    expect(verified.code).toBe(0);
    expect(verified.stdout).toMatch(/no damage/);

    const wrongKey = await runStowage(['repo', 'verify', '--repo', repoDir], { STOWAGE_REPO_KEY: 'wrong key' });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr.trim().split('\n')).toHaveLength(1);
    const noKey = await runStowage(['repo', 'verify', '--repo', repoDir], {});
    expect(noKey.code).toBe(1);
    expect(noKey.stderr.trim()).toBe('STOWAGE_REPO_KEY is not set; it holds the key the repository was written with');
  });
});

describe('stowage schedule against a running API', { timeout: 60_000 }, () => {
  it('creates, shows, lists, pauses, unpauses and deletes a schedule; a bad cron names the field', async () => {
    const created = await stowage(
      'schedule',
      'create',
      'nightly',
      '--schedule',
      'CRON_TZ=Europe/Berlin 0 3 * * *',
      '--include-namespaces',
      'shop',
      '--ttl',
      '72h',
      '--skip-immediately',
    );
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/^Schedule: +CRON_TZ=Europe\/Berlin 0 3 \* \* \*$/m);
    expect(created.stdout).toMatch(/^Phase: +Enabled$/m);
    // 03:00 in Berlin is 01:00 or 02:00 UTC (the CLI runs with TZ=UTC here), in at most a day.
    expect(created.stdout).toMatch(/^Next run: +\d{4}-\d\d-\d\d 0[12]:00:00 \+00:00 \(in \d+h\d+m0s\)$/m);
    expect(created.stdout).toMatch(/^ {2}ttl: 72h$/m);

    const listed = await stowage('schedule', 'list');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^NAME +STATUS +SCHEDULE +PAUSED +LAST BACKUP +NEXT RUN +SKIPPED +AGE$/m);
    expect(listed.stdout).toMatch(/nightly +Enabled +CRON_TZ=Europe\/Berlin 0 3 \* \* \* +false +- +\d{4}-/);

    const paused = await stowage('schedule', 'pause', 'nightly', '--json');
    const pausedBody = JSON.parse(paused.stdout) as { spec: { paused: boolean }; status: { nextRunAt?: string } };
    expect(pausedBody.spec.paused).toBe(true);
    expect(pausedBody.status.nextRunAt).toBeUndefined();
    const unpaused = await stowage('schedule', 'unpause', 'nightly');
    expect(unpaused.stdout).toMatch(/^Next run: +\d{4}-/m);

    const bad = await stowage('schedule', 'create', 'broken', '--schedule', '0 3 * *');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/spec\.schedule: a cron expression has 5 fields/);

    const deleted = await stowage('schedule', 'delete', 'nightly', '--confirm');
    expect(deleted.stdout).toBe('schedule "nightly" deleted (its backups stay)\n');
    const gone = await stowage('schedule', 'get', 'nightly');
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/schedule "nightly" does not exist/);
  });
});
