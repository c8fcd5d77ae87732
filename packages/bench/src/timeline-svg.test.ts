import { describe, expect, it } from 'vitest';
import { layoutTimeline, packRows, renderTimelineSvg, tickStepMs } from './timeline-svg.js';

describe('packRows', () => {
  it('never puts overlapping bars in one row and uses as many rows as the peak overlap', () => {
    const bars = [
      { startMs: 0, endMs: 10 },
      { startMs: 5, endMs: 15 },
      { startMs: 10, endMs: 20 }, // fits after the first (touching is not overlapping)
      { startMs: 6, endMs: 8 },
    ];
    const rows = packRows(bars);
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      for (let i = 1; i < row.length; i++) expect(row[i]!.startMs).toBeGreaterThanOrEqual(row[i - 1]!.endMs);
    }
    expect(rows.flat()).toHaveLength(4);
  });
  it('gives no rows for no bars', () => {
    expect(packRows([])).toEqual([]);
  });
});

describe('layoutTimeline', () => {
  it('gives every lane at least one row and stacks lanes without overlap', () => {
    const layout = layoutTimeline({
      title: 't',
      originMs: 0,
      endMs: 100,
      groups: [
        { name: 'node-0', bars: [], color: '#000' },
        {
          name: 'node-1',
          bars: [
            { startMs: 0, endMs: 50 },
            { startMs: 10, endMs: 60 },
          ],
          color: '#000',
        },
        { name: 'hooks', bars: [{ startMs: 70, endMs: 80 }], color: '#000' },
      ],
    });
    expect(layout.lanes.map((l) => l.rows)).toEqual([1, 2, 1]);
    for (let i = 1; i < layout.lanes.length; i++) expect(layout.lanes[i]!.y).toBeGreaterThan(layout.lanes[i - 1]!.y);
    expect(layout.height).toBeGreaterThan(layout.lanes.at(-1)!.y);
  });
});

describe('renderTimelineSvg', () => {
  it('draws one rect per bar, lane labels and escaped tooltips', () => {
    const svg = renderTimelineSvg({
      title: 'a <b> & c',
      originMs: 1000,
      endMs: 3000,
      groups: [{ name: 'node-0', bars: [{ startMs: 1000, endMs: 2000, label: 'pvb "x"' }], color: '#123456' }],
      markers: [{ atMs: 2500, label: 'bound', color: '#f00' }],
    });
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).toContain('a &lt;b&gt; &amp; c');
    expect(svg).toContain('<title>pvb &quot;x&quot;</title>');
    expect(svg.match(/fill="#123456"/g)).toHaveLength(1);
    expect(svg).toContain('>node-0<');
    expect(svg).toContain('>bound<');
  });
  it('picks round tick steps', () => {
    expect(tickStepMs(10_000)).toBe(1000);
    expect(tickStepMs(95_000)).toBe(10_000);
    expect(tickStepMs(3_000)).toBe(500);
  });
});
