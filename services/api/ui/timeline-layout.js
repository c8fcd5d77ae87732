// Pure geometry of the backup timeline: from a backup and its blocks to lanes, bars and marks in
// canvas pixels. No DOM here, so it is the same for drawing, hit testing and the test hook.

const ms = (iso) => {
  if (!iso) return undefined;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? undefined : t;
};

export const LAYOUT = {
  gutter: 120,
  rightPad: 16,
  axisHeight: 28,
  markRow: 13,
  barRow: 16,
  barGap: 4,
  laneGap: 12,
  maxBarRows: 6,
};

/** A lane label for blocks whose pods are on no known node (no volumes backed up). */
export const NO_NODE_LANE = 'no PVBs';

/**
 * Lays out a backup on a canvas `width` CSS pixels wide.
 *   lanes: one per node (PVB bars; the hook and item marks of blocks whose pods run there),
 *     plus a "no volumes" lane for blocks without PVBs. Each lane has three mark rows
 *     (pre hooks, item writes, post hooks) above its PVB bar rows.
 *   bars: one per started PVB, from startTimestamp to completionTimestamp (or now while running).
 *   marks: pre and post hook runs at their start, item writes at itemsDoneAt.
 */
export function layoutTimeline({ backup, blocks, width, nowMs }) {
  const L = LAYOUT;
  const times = [];
  const push = (t) => {
    if (t !== undefined) times.push(t);
  };
  push(ms(backup?.startedAt));
  push(ms(backup?.createdAt));
  const podNode = new Map();
  for (const b of blocks) {
    if (!b) continue;
    push(ms(b.startedAt));
    push(ms(b.itemsDoneAt));
    for (const p of b.podVolumeBackups) {
      if (p.node) podNode.set(p.pod, p.node);
      push(ms(p.startTimestamp));
      push(ms(p.completionTimestamp));
    }
    for (const r of b.hookRuns) {
      push(ms(r.startedAt));
      push(ms(r.endedAt));
    }
  }
  const ended = ms(backup?.completedAt);
  let t0 = nowMs;
  let t1 = ended ?? nowMs;
  if (times.length > 0) {
    t0 = Number.POSITIVE_INFINITY;
    for (const t of times) {
      if (t < t0) t0 = t;
      if (t > t1) t1 = t;
    }
  }
  const origin = t0;
  if (t1 - t0 < 1000) t1 = t0 + 1000;
  // A little air on both sides so marks at the edges stay visible.
  const pad = (t1 - t0) * 0.01;
  t0 -= pad;
  t1 += pad;
  const plotWidth = Math.max(50, width - L.gutter - L.rightPad);
  const pxPerMs = plotWidth / (t1 - t0);
  const xOf = (t) => L.gutter + (t - t0) * pxPerMs;

  // Which lane a block's marks go to: the node of its (first) pod that has a PVB.
  const laneOfPod = (pod, block) => podNode.get(pod) ?? homeLane(block);
  const homeLane = (block) => {
    for (const pod of block.pods) if (podNode.has(pod)) return podNode.get(pod);
    return block.podVolumeBackups[0]?.node || NO_NODE_LANE;
  };

  const laneNames = new Set();
  for (const b of blocks) {
    if (!b) continue;
    for (const p of b.podVolumeBackups) if (p.node) laneNames.add(p.node);
  }
  const sortedNodes = [...laneNames].sort();
  const hasNoNode = blocks.some((b) => b && homeLane(b) === NO_NODE_LANE && (b.hookRuns.length > 0 || b.itemsDoneAt));
  if (hasNoNode) sortedNodes.push(NO_NODE_LANE);

  // Bars packed into rows per lane (first row whose last bar ended before this one starts).
  const barsByLane = new Map(sortedNodes.map((n) => [n, []]));
  for (const b of blocks) {
    if (!b) continue;
    for (const p of b.podVolumeBackups) {
      const start = ms(p.startTimestamp);
      if (start === undefined || !p.node) continue;
      const end = ms(p.completionTimestamp);
      barsByLane.get(p.node)?.push({ block: b, pvb: p, start, end: end ?? Math.max(nowMs, start), running: end === undefined });
    }
  }

  const lanes = [];
  const bars = [];
  const marks = [];
  let y = L.axisHeight;
  for (const node of sortedNodes) {
    const laneBars = barsByLane.get(node) ?? [];
    laneBars.sort((a, b) => a.start - b.start);
    const rowEnds = [];
    for (const bar of laneBars) {
      let row = rowEnds.findIndex((end) => end <= bar.start);
      if (row < 0) {
        row = rowEnds.length < L.maxBarRows ? rowEnds.length : rowEnds.indexOf(Math.min(...rowEnds));
        if (row >= rowEnds.length) rowEnds.push(bar.end);
      }
      rowEnds[row] = Math.max(rowEnds[row] ?? 0, bar.end);
      bar.row = row;
    }
    const rows = Math.max(1, rowEnds.length);
    const lane = {
      node,
      y0: y,
      preY: y + 2,
      itemY: y + 2 + L.markRow,
      postY: y + 2 + 2 * L.markRow,
      barsY: y + 4 + 3 * L.markRow,
      rows,
    };
    lane.y1 = lane.barsY + rows * (L.barRow + L.barGap);
    y = lane.y1 + L.laneGap;
    lanes.push(lane);
    for (const bar of laneBars) {
      const x0 = xOf(bar.start);
      const x1 = xOf(bar.end);
      const by = lane.barsY + bar.row * (L.barRow + L.barGap);
      bars.push({
        kind: 'pvb',
        blockId: bar.block.id,
        pvb: bar.pvb.name,
        node,
        pod: bar.pvb.pod,
        volume: bar.pvb.volume,
        phase: bar.pvb.phase,
        running: bar.running,
        bytesDone: bar.pvb.bytesDone,
        totalBytes: bar.pvb.totalBytes,
        start: bar.start,
        end: bar.end,
        x0,
        x1: Math.max(x1, x0 + 2),
        xEnd: x1,
        y0: by,
        y1: by + L.barRow,
        lane: lanes.length - 1,
      });
    }
  }
  const laneIndex = new Map(lanes.map((l, i) => [l.node, i]));

  for (const b of blocks) {
    if (!b) continue;
    const home = homeLane(b);
    for (const r of b.hookRuns) {
      const start = ms(r.startedAt);
      if (start === undefined) continue;
      const li = laneIndex.get(laneOfPod(r.pod, b)) ?? laneIndex.get(home);
      if (li === undefined) continue;
      const lane = lanes[li];
      const end = ms(r.endedAt);
      const cy = r.phase === 'pre' ? lane.preY + L.markRow / 2 : lane.postY + L.markRow / 2;
      marks.push({
        kind: r.phase === 'pre' ? 'pre' : 'post',
        blockId: b.id,
        pod: r.pod,
        container: r.container,
        exitCode: r.exitCode,
        outcome: r.outcome,
        start,
        end,
        x: xOf(start),
        xEnd: end !== undefined ? xOf(end) : undefined,
        y: cy,
        lane: li,
      });
    }
    const itemsDone = ms(b.itemsDoneAt);
    const li = laneIndex.get(home);
    if (itemsDone !== undefined && li !== undefined) {
      const lane = lanes[li];
      marks.push({
        kind: 'items',
        blockId: b.id,
        items: b.itemsWritten ?? b.itemCount,
        start: ms(b.startedAt),
        end: itemsDone,
        x: xOf(itemsDone),
        y: lane.itemY + L.markRow / 2,
        lane: li,
      });
    }
  }

  return { t0, t1, origin, pxPerMs, xOf, lanes, bars, marks, height: y + 4, width };
}

/** "Nice" axis ticks, relative to `origin`: about one per 110 px, on 1/2/5 × 10^n ms. */
export function axisTicks(t0, t1, origin, width) {
  const span = t1 - t0;
  const target = Math.max(2, Math.floor(width / 110));
  const raw = span / target;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) ?? raw;
  const ticks = [];
  const first = origin + Math.ceil((t0 - origin) / step) * step;
  for (let t = first; t <= t1; t += step) ticks.push(t);
  return { step, ticks };
}
