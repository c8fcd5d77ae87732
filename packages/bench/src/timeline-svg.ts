/** An SVG timeline of one benchmark run: a lane per node for PVB copies, then block jobs and hooks. */

export interface TimelineBar {
  startMs: number;
  endMs: number;
  /** Tooltip text (`<title>`). */
  label?: string;
}

export interface TimelineGroup {
  /** Lane label, e.g. `node-3`, `item-block jobs`, `post hooks (exec)`. */
  name: string;
  bars: readonly TimelineBar[];
  color: string;
}

export interface TimelineInput {
  title: string;
  subtitle?: string;
  /** Time zero of the axis (the submit), epoch ms. */
  originMs: number;
  /** Axis end, epoch ms (the backup's completion). */
  endMs: number;
  groups: readonly TimelineGroup[];
  /** Vertical markers, e.g. the node-agent bound. */
  markers?: ReadonlyArray<{ atMs: number; label: string; color: string }>;
}

/**
 * Greedy interval packing: bars sorted by start go into the first row that is free by then, so
 * overlapping bars never share a row and the row count equals the peak overlap.
 */
export function packRows<T extends TimelineBar>(bars: readonly T[]): T[][] {
  const sorted = [...bars].sort((a, b) => a.startMs - b.startMs || a.endMs - b.endMs);
  const rows: T[][] = [];
  const rowEnds: number[] = [];
  for (const bar of sorted) {
    let row = rowEnds.findIndex((end) => end <= bar.startMs);
    if (row === -1) {
      row = rows.length;
      rows.push([]);
      rowEnds.push(bar.endMs);
    }
    rows[row]?.push(bar);
    rowEnds[row] = Math.max(bar.endMs, bar.startMs);
  }
  return rows;
}

/** A round tick step (1, 2 or 5 × 10^n ms) giving about `target` ticks over `spanMs`. */
export function tickStepMs(spanMs: number, target = 10): number {
  const raw = Math.max(1, spanMs / target);
  const pow = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
  return 10 * pow;
}

const escapeXml = (s: string) =>
  s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c] ?? c);

export interface TimelineLayout {
  width: number;
  height: number;
  /** Per group: its first row's y and its row count (at least one row, even when empty). */
  lanes: Array<{ name: string; y: number; rows: number }>;
}

const ROW_H = 8;
const ROW_GAP = 1;
const LANE_GAP = 4;
const LEFT = 150;
const TOP = 56;
const RIGHT = 20;
const BOTTOM = 40;

export function layoutTimeline(input: TimelineInput, width = 1200): TimelineLayout & { packed: TimelineBar[][][] } {
  let y = TOP;
  const lanes: TimelineLayout['lanes'] = [];
  const packed: TimelineBar[][][] = [];
  for (const g of input.groups) {
    const rows = packRows(g.bars);
    const n = Math.max(1, rows.length);
    lanes.push({ name: g.name, y, rows: n });
    packed.push(rows);
    y += n * (ROW_H + ROW_GAP) + LANE_GAP;
  }
  return { width, height: y + BOTTOM, lanes, packed };
}

export function renderTimelineSvg(input: TimelineInput, width = 1200): string {
  const layout = layoutTimeline(input, width);
  const span = Math.max(1, input.endMs - input.originMs);
  const plotW = width - LEFT - RIGHT;
  const x = (t: number) => LEFT + ((t - input.originMs) / span) * plotW;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${layout.height}" viewBox="0 0 ${width} ${layout.height}" font-family="sans-serif" font-size="10" role="img">`,
    `<title>${escapeXml(input.title)}</title>`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="18" font-size="14" font-weight="bold">${escapeXml(input.title)}</text>`,
  );
  if (input.subtitle) out.push(`<text x="10" y="34" fill="#444">${escapeXml(input.subtitle)}</text>`);
  const step = tickStepMs(span);
  const axisY = layout.height - BOTTOM + 6;
  for (let t = 0; t <= span; t += step) {
    const tx = x(input.originMs + t).toFixed(1);
    out.push(
      `<line x1="${tx}" y1="${TOP - 4}" x2="${tx}" y2="${axisY}" stroke="#eee"/>`,
      `<text x="${tx}" y="${axisY + 12}" text-anchor="middle" fill="#444">${step >= 1000 ? `${t / 1000}s` : `${t}ms`}</text>`,
    );
  }
  layout.lanes.forEach((lane, i) => {
    const group = input.groups[i];
    if (!group) return;
    const h = lane.rows * (ROW_H + ROW_GAP) - ROW_GAP;
    if (i % 2 === 0) out.push(`<rect x="${LEFT}" y="${lane.y}" width="${plotW}" height="${h}" fill="#f7f7f7"/>`);
    out.push(`<text x="${LEFT - 6}" y="${lane.y + Math.min(h, ROW_H + 1)}" text-anchor="end" fill="#222">${escapeXml(lane.name)}</text>`);
    (layout.packed[i] ?? []).forEach((row, r) => {
      const ry = lane.y + r * (ROW_H + ROW_GAP);
      for (const bar of row) {
        const bx = x(bar.startMs);
        const bw = Math.max(0.8, x(bar.endMs) - bx);
        const title = bar.label ? `<title>${escapeXml(bar.label)}</title>` : '';
        out.push(`<rect x="${bx.toFixed(1)}" y="${ry}" width="${bw.toFixed(1)}" height="${ROW_H}" fill="${group.color}">${title}</rect>`);
      }
    });
  });
  for (const m of input.markers ?? []) {
    const mx = x(m.atMs).toFixed(1);
    out.push(
      `<line x1="${mx}" y1="${TOP - 10}" x2="${mx}" y2="${axisY}" stroke="${m.color}" stroke-dasharray="4 3"/>`,
      `<text x="${mx}" y="${TOP - 14}" text-anchor="middle" fill="${m.color}">${escapeXml(m.label)}</text>`,
    );
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
