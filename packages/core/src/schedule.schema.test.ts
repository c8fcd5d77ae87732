import { describe, expect, it } from 'vitest';
import {
  nextScheduleTick,
  parseScheduleExpression,
  scheduledBackupName,
  validateSchedulePatch,
  validateScheduleRequest,
} from './schedule.schema.js';

const at = (iso: string) => Date.parse(iso);

describe('parseScheduleExpression', () => {
  it.each([
    { expr: '0 3 * * *', after: '2026-12-04T00:00:00Z', next: '2026-12-04T03:00:00.000Z' },
    { expr: '*/5 * * * * *', after: '2026-12-04T00:00:01Z', next: '2026-12-04T00:00:05.000Z' },
    { expr: '@daily', after: '2026-12-04T10:00:00Z', next: '2026-12-05T00:00:00.000Z' },
    { expr: '@hourly', after: '2026-12-04T10:20:00Z', next: '2026-12-04T11:00:00.000Z' },
    { expr: 'CRON_TZ=Europe/Berlin 0 3 * * *', after: '2026-12-04T00:00:00Z', next: '2026-12-04T02:00:00.000Z' },
    { expr: 'TZ=America/New_York 0 3 * * *', after: '2026-12-04T00:00:00Z', next: '2026-12-04T08:00:00.000Z' },
    { expr: '@every 6h', after: '2026-12-04T00:00:00Z', next: '2026-12-04T06:00:00.000Z' },
  ])('$expr fires next at $next', ({ expr, after, next }) => {
    const parsed = parseScheduleExpression(expr);
    if (!parsed.ok) throw new Error(parsed.message);
    expect(new Date(nextScheduleTick(parsed.timing, at(after))).toISOString()).toBe(next);
  });

  it.each([
    { expr: '', why: /is empty/ },
    { expr: '* * *', why: /5 fields .* got 3/ },
    { expr: '61 * * * *', why: /not a valid cron expression/ },
    { expr: '0 0 31 2 *', why: /not a valid cron expression/ },
    { expr: 'CRON_TZ=Mars/Olympus 0 3 * * *', why: /Mars\/Olympus.* not an IANA zone/ },
    { expr: '@fortnightly', why: /unknown descriptor/ },
    { expr: '@every soon', why: /@every needs a duration/ },
    { expr: '@every 10ms', why: /at least 1s/ },
    { expr: 'TZ=UTC @every 1h', why: /no time zone/ },
  ])('rejects $expr', ({ expr, why }) => {
    const parsed = parseScheduleExpression(expr);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.message).toMatch(why);
  });
});

describe('scheduledBackupName', () => {
  it('is <schedule>-<yyyyMMddHHmmss> of the tick in UTC, the same for the same tick', () => {
    expect(scheduledBackupName('nightly', at('2026-12-04T03:00:05.250Z'))).toBe('nightly-20261204030005');
    expect(scheduledBackupName('nightly', at('2026-12-04T03:00:05.999Z'))).toBe('nightly-20261204030005');
  });
});

describe('validateScheduleRequest', () => {
  it('accepts Velero’s Schedule shape, validating the template as a backup spec', () => {
    const v = validateScheduleRequest({
      name: 'nightly',
      spec: { schedule: '0 3 * * *', template: { includedNamespaces: ['shop'], ttl: '72h' }, skipImmediately: true },
    });
    if (!v.ok) throw new Error(JSON.stringify(v.problems));
    expect(v.name).toBe('nightly');
    expect(v.value.template.includedNamespaces).toEqual(['shop']);
    expect(v.value.template.ttlMs).toBe(72 * 3_600_000);
    expect(v.value).toMatchObject({
      paused: false,
      skipImmediately: true,
      timing: { kind: 'cron', pattern: '0 3 * * *', timeZone: 'UTC' },
    });
  });

  it('reports every problem at once, template problems under spec.template', () => {
    const v = validateScheduleRequest({
      name: 'Nightly_Backups',
      extra: 1,
      spec: { schedule: '99 * * * *', template: { includedNamespaces: 'shop', ttl: 'forever' }, paused: 'yes', every: 3 },
    });
    expect(v.ok).toBe(false);
    if (v.ok) return;
    const paths = v.problems.map((p) => p.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'name',
        'extra',
        'spec.schedule',
        'spec.paused',
        'spec.every',
        'spec.template.includedNamespaces',
        'spec.template.ttl',
      ]),
    );
  });

  it('keeps room in the name for the tick stamp of its backups', () => {
    const v = validateScheduleRequest({ name: 'a'.repeat(49), spec: { schedule: '@daily' } });
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.problems[0]?.message).toMatch(/longer than 48 characters/);
  });

  it('a patch is validated merged over the stored spec', () => {
    const current = { name: 'nightly', spec: { schedule: '0 3 * * *', template: { includedNamespaces: ['shop'] } } };
    const paused = validateSchedulePatch(current, { spec: { paused: true } });
    expect(paused.ok && paused.value.paused).toBe(true);
    expect(paused.ok && paused.value.template.includedNamespaces).toEqual(['shop']);
    const bad = validateSchedulePatch(current, { spec: { schedule: 'never' } });
    expect(bad.ok).toBe(false);
    expect(validateSchedulePatch(current, { name: 'other' }).ok).toBe(false);
  });
});
