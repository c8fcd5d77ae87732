import { describe, expect, it } from 'vitest';
import { parseBenchArgs, SCENARIOS } from './bench-options.js';

const defaults = { svgDir: '/repo/docs/bench' };

describe('parseBenchArgs', () => {
  it('uses the default scenario, both modes, the orchestration run and SVGs; the report is only printed', () => {
    const r = parseBenchArgs([], defaults);
    if (r.ok !== true) throw new Error('expected ok');
    expect(r.options.fs).toEqual(SCENARIOS.default.fs);
    expect(r.options.modes).toEqual(['decoupled', 'inline']);
    expect(r.options.runOrchestration).toBe(true);
    expect(r.options.markdown).toBeUndefined();
    const md = parseBenchArgs(['--markdown', '/tmp/b.md'], defaults);
    expect(md.ok === true && md.options.markdown).toBe('/tmp/b.md');
    expect(r.options.svgDir).toBe(defaults.svgDir);
  });
  it('starts from the large preset and applies flags over it, sizes included', () => {
    const r = parseBenchArgs(
      ['--blocks', '12', '--scenario', 'large', '--bytes', '64KiB', '--bandwidth', '1MiB/s', '--json', 'out.json'],
      defaults,
    );
    if (r.ok !== true) throw new Error('expected ok');
    expect(r.options.scenario).toBe('large');
    expect(r.options.fs.filesPerVolume).toBe(SCENARIOS.large.fs.filesPerVolume);
    expect(r.options.fs.blocks).toBe(12);
    expect(r.options.fs.bytesPerVolume).toBe(65536);
    expect(r.options.fs.bandwidthBytesPerSec).toBe(1048576);
    expect(r.options.json).toBe('out.json');
  });
  it('reports every problem at once', () => {
    const r = parseBenchArgs(['--blocks', '0', '--modes', 'fast', '--bytes', 'lots', '--frobnicate', '--scenario', 'giant'], defaults);
    expect(r.ok).toBe(false);
    if (r.ok !== false) return;
    expect(r.problems).toHaveLength(5);
    expect(r.problems.join('\n')).toMatch(/--scenario must be default, large, huge, restore or freeze, got giant/);
    expect(r.problems.join('\n')).toMatch(/--blocks needs an integer >= 1, got 0/);
    expect(r.problems.join('\n')).toMatch(/unknown option --frobnicate/);
  });
  it('takes the huge scenario and its sizes', () => {
    const r = parseBenchArgs(['--scenario', 'huge', '--huge-pods', '2000', '--huge-namespaces', '20', '--huge-window', '0'], defaults);
    if (r.ok !== true) throw new Error(JSON.stringify(r));
    expect(r.options.scenario).toBe('huge');
    expect(r.options.huge).toMatchObject({ pods: 2000, namespaces: 20, nodes: 100, blocksInFlightPerBackup: 0 });
    const bad = parseBenchArgs(['--scenario', 'huge', '--huge-pods', '10', '--huge-namespaces', '20'], defaults);
    expect(bad.ok === false && bad.problems).toEqual(['--huge-pods must be at least --huge-namespaces']);
  });
  it('ignores the `--` pnpm passes through', () => {
    const r = parseBenchArgs(['--', '--no-markdown'], defaults);
    expect(r.ok === true && r.options.markdown).toBe(undefined);
  });
  it('answers --help', () => {
    expect(parseBenchArgs(['--help'], defaults).ok).toBe('help');
  });
});
