/*
 * The alerts in k8s/monitoring/prometheus-rule.yaml, checked by Prometheus' own promtool: the
 * rule groups (the PrometheusRule's `spec`, read with the yaml library) must load (`promtool check
 * rules`) and fire exactly when prometheus-rule.test.yaml says (`promtool test rules`). A broken
 * copy is refused, so the check is not a formality.
 */
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { REPO_ROOT, runTool } from './run-tool.js';

const PROMTOOL_HINT = 'install promtool (Debian: apt-get install -y prometheus; scripts/preflight.mjs does this)';
const MONITORING = join(REPO_ROOT, 'k8s', 'monitoring');
let dir: string;
let groups: { groups: Array<{ name: string; rules: Array<{ alert?: string; expr: string }> }> };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'stowage-alerts-'));
  const rule = parseYaml(await readFile(join(MONITORING, 'prometheus-rule.yaml'), 'utf8')) as { kind: string; spec: typeof groups };
  expect(rule.kind).toBe('PrometheusRule');
  groups = rule.spec;
  await writeFile(join(dir, 'rules.yaml'), toYaml(groups));
  await copyFile(join(MONITORING, 'prometheus-rule.test.yaml'), join(dir, 'rules.test.yaml'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('alert rules', () => {
  it('load in promtool: every alert the issue asks for is there', async () => {
    const checked = await runTool('promtool', ['check', 'rules', join(dir, 'rules.yaml')], PROMTOOL_HINT);
    expect(checked.exitCode, checked.stdout + checked.stderr).toBe(0);
    expect(checked.stdout).toMatch(/SUCCESS: 6 rules found/);
    const alerts = groups.groups.flatMap((g) => g.rules.map((r) => r.alert));
    expect(alerts.sort()).toEqual([
      'StowageBackupFailed',
      'StowageBackupPartiallyFailed',
      'StowageNodeAgentDown',
      'StowageQueueBacklogGrowing',
      'StowageRepositoryPruneFailing',
      'StowageScheduleNoRecentSuccess',
    ]);
  });

  it('fire when and only when the unit tests say (promtool test rules)', async () => {
    const tested = await runTool('promtool', ['test', 'rules', join(dir, 'rules.test.yaml')], PROMTOOL_HINT, dir);
    expect(tested.exitCode, tested.stdout + tested.stderr).toBe(0);
    expect(tested.stdout).toContain('SUCCESS');
  });

  it('a broken expression or a rule that no longer fires as tested is refused', async () => {
    const broken = structuredClone(groups);
    const first = broken.groups[0]?.rules[0];
    if (!first) throw new Error('no rule');
    first.expr = 'max by (schedule) (stowage_schedule_interval_seconds';
    await writeFile(join(dir, 'broken.yaml'), toYaml(broken));
    const checked = await runTool('promtool', ['check', 'rules', join(dir, 'broken.yaml')], PROMTOOL_HINT);
    expect(checked.exitCode).not.toBe(0);

    // Twice the interval becomes ten times: the tested alert no longer fires at 49h.
    const lax = structuredClone(groups);
    const schedule = lax.groups[0]?.rules[0];
    if (!schedule) throw new Error('no rule');
    schedule.expr = schedule.expr.replace('> 2 *', '> 10 *');
    await writeFile(join(dir, 'rules.yaml'), toYaml(lax));
    const tested = await runTool('promtool', ['test', 'rules', join(dir, 'rules.test.yaml')], PROMTOOL_HINT, dir);
    expect(tested.exitCode).not.toBe(0);
    await writeFile(join(dir, 'rules.yaml'), toYaml(groups));
  });
});
