// The backup timeline on one <canvas>: a lane per node with its PVB bars, and per block its pre
// hooks, item writes and post hooks as marks. Redraws are batched with requestAnimationFrame; the
// number of DOM nodes does not grow with the number of blocks. Keyboard: focus the canvas, then
// arrows move between items (←/→ in time, ↑/↓ between lanes), Enter shows the block in the table.

import { formatBytes, formatDuration, formatTime, h } from './format.js';
import { axisTicks, LAYOUT, layoutTimeline, NO_NODE_LANE } from './timeline-layout.js';

const PHASE_VARS = ['New', 'InProgress', 'Completed', 'Failed', 'Canceling', 'Canceled'];

function readColors() {
  const css = getComputedStyle(document.documentElement);
  const v = (name) => css.getPropertyValue(name).trim();
  const phase = {};
  for (const p of PHASE_VARS) phase[p] = v(`--pvb-${p}`);
  return {
    phase,
    text: v('--text'),
    muted: v('--muted'),
    grid: v('--grid'),
    lane: v('--lane-bg'),
    pre: v('--mark-pre'),
    items: v('--mark-items'),
    post: v('--mark-post'),
    fail: v('--mark-fail'),
    focus: v('--focus'),
    bg: v('--surface'),
  };
}

/**
 * Mounts the timeline into `container`. `onSelectBlock(blockId)` is called on click/Enter.
 * Returns `{ update(run, blocks), destroy() }`. A backup's blocks carry PVBs; a restore page
 * passes `volumeKind: 'PVR'`, `subject: 'Restore'` and blocks (its pods and tiers) whose
 * `podVolumeBackups` hold its PVRs, so one timeline draws both (restore-page.js).
 */
export function createTimeline(container, { onSelectBlock = () => {}, volumeKind = 'PVB', subject = 'Backup', unit = 'block' } = {}) {
  const canvas = h('canvas', {
    class: 'timeline-canvas',
    tabindex: '0',
    role: 'application',
    'aria-roledescription': 'timeline',
    'aria-label': `${subject} timeline. Arrow keys move between ${volumeKind}s and hook marks, Enter shows the ${unit} in the table below, Escape clears.`,
    'aria-describedby': 'timeline-focus-text',
  });
  const tooltip = h('div', { class: 'timeline-tooltip', role: 'tooltip', hidden: true });
  const focusText = h('p', { id: 'timeline-focus-text', class: 'timeline-focus-text', 'aria-live': 'polite' }, '');
  const wrap = h('div', { class: 'timeline-wrap' }, canvas, tooltip);
  const legend = h(
    'ul',
    { class: 'timeline-legend', 'aria-label': 'Legend' },
    // A restore has no pre hooks; its item marks are tiers done.
    subject === 'Restore' ? null : h('li', {}, h('span', { class: 'key key-pre', 'aria-hidden': 'true' }), 'pre hook'),
    h('li', {}, h('span', { class: 'key key-items', 'aria-hidden': 'true' }), subject === 'Restore' ? 'tier restored' : 'items written'),
    h('li', {}, h('span', { class: 'key key-post', 'aria-hidden': 'true' }), subject === 'Restore' ? 'post-restore hook' : 'post hook'),
    ...['InProgress', 'Completed', 'Failed', 'Canceled'].map((p) =>
      h('li', {}, h('span', { class: `key key-bar key-${p}`, 'aria-hidden': 'true' }), `${volumeKind} ${p}`),
    ),
  );
  container.append(wrap, focusText, legend);

  let backup;
  let blocks = [];
  let layout;
  let colors = readColors();
  let frame = 0;
  let dirtyLayout = true;
  let hovered; // item under the pointer
  let focused; // item chosen with the keyboard
  let nav = []; // items per lane, sorted by x, for keyboard moves

  const scheme = matchMedia('(prefers-color-scheme: dark)');
  const onScheme = () => {
    colors = readColors();
    schedule();
  };
  scheme.addEventListener('change', onScheme);
  const resize = new ResizeObserver(() => schedule(true));
  resize.observe(wrap);
  // While the backup runs, running bars grow with the clock.
  const tick = setInterval(() => {
    if (backup && !backup.completedAt) schedule(true);
  }, 1000);

  function schedule(relayout = false) {
    if (relayout) dirtyLayout = true;
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      draw();
    });
  }

  function items() {
    return layout ? [...layout.bars, ...layout.marks] : [];
  }

  function draw() {
    const width = Math.max(320, Math.floor(wrap.clientWidth));
    if (dirtyLayout || !layout || layout.width !== width) {
      layout = layoutTimeline({ backup, blocks, width, nowMs: Date.now() });
      nav = layout.lanes.map((_, i) =>
        [...layout.bars.filter((b) => b.lane === i), ...layout.marks.filter((m) => m.lane === i)].sort((a, b) => xOfItem(a) - xOfItem(b)),
      );
      if (focused) focused = findSame(focused);
      if (hovered) hovered = findSame(hovered);
      dirtyLayout = false;
    }
    const dpr = window.devicePixelRatio || 1;
    const height = Math.max(layout.height, 80);
    if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.style.height = `${height}px`;
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    drawAxis(ctx, width, height);
    const active = focused ?? hovered;
    const activeBlock = active?.blockId;
    for (const lane of layout.lanes) drawLane(ctx, lane, width);
    // Everything of the active block is drawn on top, the rest faded, so one block reads at a glance.
    ctx.globalAlpha = activeBlock ? 0.3 : 1;
    for (const bar of layout.bars) if (bar.blockId !== activeBlock) drawBar(ctx, bar);
    for (const m of layout.marks) if (m.blockId !== activeBlock) drawMark(ctx, m);
    ctx.globalAlpha = 1;
    if (activeBlock) {
      for (const bar of layout.bars) if (bar.blockId === activeBlock) drawBar(ctx, bar);
      for (const m of layout.marks) if (m.blockId === activeBlock) drawMark(ctx, m);
      drawBlockGuide(ctx, activeBlock);
    }
    if (active) drawFocus(ctx, active);
    if (layout.lanes.length === 0) {
      ctx.fillStyle = colors.muted;
      ctx.font = '13px system-ui, sans-serif';
      ctx.fillText(blocks.length === 0 ? 'Waiting for the plan…' : `No ${volumeKind}s or hooks yet`, 16, 56);
    }
    exposeGeometry();
    positionTooltip(active);
  }

  function drawAxis(ctx, width, height) {
    const { ticks } = axisTicks(layout.t0, layout.t1, layout.origin, width - 136);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (const t of ticks) {
      const x = Math.round(layout.xOf(t)) + 0.5;
      ctx.strokeStyle = colors.grid;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, 22);
      ctx.lineTo(x, height);
      ctx.stroke();
      ctx.fillStyle = colors.muted;
      const label = `+${formatDuration(t - layout.origin)}`.replace('+0 ms', '0');
      if (x + 3 + ctx.measureText(label).width <= width) ctx.fillText(label, x + 3, 12);
    }
    if (backup && !backup.completedAt) {
      const x = Math.round(layout.xOf(Date.now())) + 0.5;
      ctx.strokeStyle = colors.focus;
      ctx.setLineDash([3, 3]);
      ctx.beginPath();
      ctx.moveTo(x, 22);
      ctx.lineTo(x, height);
      ctx.stroke();
      ctx.setLineDash([]);
    }
  }

  function drawLane(ctx, lane, width) {
    ctx.fillStyle = colors.lane;
    ctx.fillRect(0, lane.y0, width, lane.y1 - lane.y0);
    ctx.fillStyle = colors.text;
    ctx.font = '600 12px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    const mid = LAYOUT.markRow / 2;
    ctx.fillText(fit(ctx, lane.node === NO_NODE_LANE ? `no ${volumeKind}s` : lane.node, 72), 8, lane.preY + mid);
    ctx.fillStyle = colors.muted;
    ctx.font = '10px system-ui, sans-serif';
    ctx.fillText('pre', 84, lane.preY + mid);
    ctx.fillText('items', 84, lane.itemY + mid);
    ctx.fillText('post', 84, lane.postY + mid);
    if (lane.node !== NO_NODE_LANE) ctx.fillText(`${volumeKind}s`, 84, lane.barsY + LAYOUT.barRow / 2);
  }

  /** Long node names are cut with an ellipsis (the full name is in the tooltip and the table). */
  function fit(ctx, text, maxWidth) {
    if (ctx.measureText(text).width <= maxWidth) return text;
    let cut = text;
    while (cut.length > 1 && ctx.measureText(`${cut}…`).width > maxWidth) cut = cut.slice(0, -1);
    return `${cut}…`;
  }

  function drawBar(ctx, bar) {
    const w = Math.max(2, bar.x1 - bar.x0);
    const base = colors.phase[bar.phase] || colors.phase.New;
    ctx.fillStyle = base;
    if (bar.running && bar.totalBytes > 0) {
      // The copied fraction solid, the rest translucent.
      const frac = Math.min(1, (bar.bytesDone ?? 0) / bar.totalBytes);
      ctx.globalAlpha *= 0.45;
      ctx.fillRect(bar.x0, bar.y0, w, bar.y1 - bar.y0);
      ctx.globalAlpha /= 0.45;
      ctx.fillRect(bar.x0, bar.y0, Math.max(1, w * frac), bar.y1 - bar.y0);
    } else {
      ctx.fillRect(bar.x0, bar.y0, w, bar.y1 - bar.y0);
    }
    if (bar.phase === 'Failed' || bar.phase === 'Canceled') {
      // Hatched, so failure does not rest on colour alone.
      ctx.save();
      ctx.beginPath();
      ctx.rect(bar.x0, bar.y0, w, bar.y1 - bar.y0);
      ctx.clip();
      ctx.strokeStyle = colors.bg;
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      for (let x = bar.x0 - 14; x < bar.x0 + w; x += 6) {
        ctx.moveTo(x, bar.y1);
        ctx.lineTo(x + 14, bar.y0);
      }
      ctx.stroke();
      ctx.restore();
    }
  }

  function drawMark(ctx, m) {
    // A hook still running is drawn in its phase's colour, not as a failure.
    const failed = (m.kind === 'pre' || m.kind === 'post') && m.outcome !== 'running' && !(m.outcome === 'exited' && m.exitCode === 0);
    ctx.fillStyle = failed ? colors.fail : colors[m.kind];
    ctx.strokeStyle = ctx.fillStyle;
    if (m.xEnd !== undefined && m.xEnd - m.x > 3) {
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(m.x, m.y);
      ctx.lineTo(m.xEnd, m.y);
      ctx.stroke();
    }
    ctx.beginPath();
    if (m.kind === 'pre') {
      // ▼ pointing at the work it precedes
      ctx.moveTo(m.x - 5, m.y - 4);
      ctx.lineTo(m.x + 5, m.y - 4);
      ctx.lineTo(m.x, m.y + 5);
    } else if (m.kind === 'post') {
      // ▲ after the bars
      ctx.moveTo(m.x - 5, m.y + 4);
      ctx.lineTo(m.x + 5, m.y + 4);
      ctx.lineTo(m.x, m.y - 5);
    } else {
      ctx.rect(m.x - 3, m.y - 3, 6, 6);
    }
    ctx.closePath();
    ctx.fill();
  }

  function drawBlockGuide(ctx, blockId) {
    // A line joining the block's pieces, from its first mark to its last.
    const parts = items().filter((it) => it.blockId === blockId);
    if (parts.length < 2) return;
    let minX = Number.POSITIVE_INFINITY;
    let maxX = Number.NEGATIVE_INFINITY;
    for (const p of parts) {
      minX = Math.min(minX, p.x0 ?? p.x);
      maxX = Math.max(maxX, p.x1 ?? p.x);
    }
    ctx.strokeStyle = colors.focus;
    ctx.setLineDash([2, 3]);
    ctx.lineWidth = 1;
    for (const x of [minX, maxX]) {
      ctx.beginPath();
      ctx.moveTo(Math.round(x) + 0.5, 22);
      ctx.lineTo(Math.round(x) + 0.5, layout.height);
      ctx.stroke();
    }
    ctx.setLineDash([]);
  }

  function drawFocus(ctx, it) {
    ctx.strokeStyle = colors.focus;
    ctx.lineWidth = 2;
    if (it.kind === 'pvb') ctx.strokeRect(it.x0 - 2, it.y0 - 2, Math.max(2, it.x1 - it.x0) + 4, it.y1 - it.y0 + 4);
    else ctx.strokeRect(it.x - 7, it.y - 7, 14, 14);
  }

  function xOfItem(it) {
    return it.kind === 'pvb' ? it.x0 : it.x;
  }

  function findSame(it) {
    return items().find(
      (o) => o.kind === it.kind && o.blockId === it.blockId && o.pvb === it.pvb && o.pod === it.pod && o.start === it.start,
    );
  }

  function hitTest(x, y) {
    if (!layout) return undefined;
    let best;
    let bestDist = 7;
    for (const m of layout.marks) {
      const d = Math.max(Math.abs(m.x - x), Math.abs(m.y - y));
      if (d < bestDist) {
        best = m;
        bestDist = d;
      }
    }
    if (best) return best;
    for (const b of layout.bars) {
      if (x >= b.x0 - 2 && x <= b.x1 + 2 && y >= b.y0 - 1 && y <= b.y1 + 1) return b;
    }
    return undefined;
  }

  function describe(it) {
    if (!it) return '';
    if (it.kind === 'pvb') {
      const bytes =
        it.totalBytes !== undefined ? `${formatBytes(it.bytesDone)} of ${formatBytes(it.totalBytes)}` : formatBytes(it.bytesDone);
      return `${volumeKind} ${it.pvb} — ${it.pod} volume ${it.volume} on ${it.node}: ${it.phase}, ${bytes}, ${formatDuration(it.end - it.start)}${
        it.running ? ' so far' : ''
      } (started ${formatTime(new Date(it.start).toISOString())}). ${whose(it)}.`;
    }
    if (it.kind === 'items')
      return `Items ${subject === 'Restore' ? 'restored' : 'written'}: ${it.items ?? '?'} item(s), done at +${formatDuration(it.end - layout.origin)}. ${whose(it)}.`;
    const what = it.kind === 'pre' ? 'Pre hook' : 'Post hook';
    const result = it.outcome === 'exited' ? `exit ${it.exitCode}` : (it.outcome ?? 'running');
    const dur = it.end !== undefined ? formatDuration(it.end - it.start) : 'running';
    return `${what} in ${it.pod} (${it.container}): ${result}, ${dur}, at +${formatDuration(it.start - layout.origin)}. ${whose(it)}.`;
  }

  /** "Block b-3", or for a restore the pod or tier the item belongs to. */
  function whose(it) {
    return unit === 'block' ? `Block ${it.blockId}` : it.blockId;
  }

  function positionTooltip(it) {
    if (!it) {
      tooltip.hidden = true;
      return;
    }
    tooltip.textContent = describe(it);
    tooltip.hidden = false;
    const x = it.kind === 'pvb' ? (it.x0 + it.x1) / 2 : it.x;
    const y = it.kind === 'pvb' ? it.y1 : it.y + 6;
    const maxLeft = Math.max(0, wrap.clientWidth - tooltip.offsetWidth - 4);
    tooltip.style.left = `${Math.min(maxLeft, Math.max(0, x - tooltip.offsetWidth / 2))}px`;
    tooltip.style.top = `${y + 8}px`;
  }

  /** Test hook (documented in the README): the drawn geometry in page coordinates. */
  function exposeGeometry() {
    const rect = canvas.getBoundingClientRect();
    const ox = rect.left + window.scrollX;
    const oy = rect.top + window.scrollY;
    window.__stowageTimeline = {
      subject,
      backup: backup?.name,
      phase: backup?.phase,
      blocks: blocks.filter(Boolean).length,
      t0: layout.t0,
      t1: layout.t1,
      pxPerMs: layout.pxPerMs,
      canvas: { left: ox, top: oy, width: rect.width, height: rect.height },
      lanes: layout.lanes.map((l) => ({ node: l.node, y0: oy + l.y0, y1: oy + l.y1 })),
      pvbBars: layout.bars.map((b) => ({
        blockId: b.blockId,
        pvb: b.pvb,
        node: b.node,
        phase: b.phase,
        running: b.running,
        x0: ox + b.x0,
        x1: ox + b.xEnd,
        y: oy + b.y0,
      })),
      preHookMarks: layout.marks.filter((m) => m.kind === 'pre').map((m) => ({ blockId: m.blockId, pod: m.pod, x: ox + m.x, y: oy + m.y })),
      itemMarks: layout.marks.filter((m) => m.kind === 'items').map((m) => ({ blockId: m.blockId, x: ox + m.x, y: oy + m.y })),
      postHookMarks: layout.marks
        .filter((m) => m.kind === 'post')
        .map((m) => ({ blockId: m.blockId, pod: m.pod, x: ox + m.x, y: oy + m.y })),
      drawnAt: Date.now(),
    };
  }

  function setFocused(it) {
    focused = it;
    focusText.textContent = describe(it);
    schedule();
  }

  canvas.addEventListener('pointermove', (e) => {
    const r = canvas.getBoundingClientRect();
    const it = hitTest(e.clientX - r.left, e.clientY - r.top);
    if (it !== hovered) {
      hovered = it;
      canvas.style.cursor = it ? 'pointer' : 'default';
      schedule();
    }
  });
  canvas.addEventListener('pointerleave', () => {
    hovered = undefined;
    schedule();
  });
  canvas.addEventListener('click', (e) => {
    const r = canvas.getBoundingClientRect();
    const it = hitTest(e.clientX - r.left, e.clientY - r.top);
    if (it) {
      setFocused(it);
      onSelectBlock(it.blockId);
    }
  });
  canvas.addEventListener('focus', () => {
    if (!focused && nav.length > 0) setFocused(nav.find((l) => l.length > 0)?.[0]);
  });
  canvas.addEventListener('blur', () => {
    // The keyboard choice lasts while the timeline has focus; the table keeps the selected block.
    focused = undefined;
    focusText.textContent = '';
    schedule();
  });
  canvas.addEventListener('keydown', (e) => {
    if (!layout || nav.length === 0) return;
    const lane = focused ? focused.lane : 0;
    const list = nav[lane] ?? [];
    const idx = focused ? list.indexOf(focused) : -1;
    let next;
    switch (e.key) {
      case 'ArrowRight':
        next = list[Math.min(list.length - 1, idx + 1)];
        break;
      case 'ArrowLeft':
        next = list[Math.max(0, idx - 1)];
        break;
      case 'Home':
        next = list[0];
        break;
      case 'End':
        next = list[list.length - 1];
        break;
      case 'ArrowDown':
      case 'ArrowUp': {
        const step = e.key === 'ArrowDown' ? 1 : -1;
        let l = lane + step;
        while (l >= 0 && l < nav.length && nav[l].length === 0) l += step;
        const target = nav[l];
        if (!target) break;
        const x = focused ? xOfItem(focused) : 0;
        next = target.reduce((a, b) => (Math.abs(xOfItem(b) - x) < Math.abs(xOfItem(a) - x) ? b : a));
        break;
      }
      case 'Enter':
      case ' ':
        if (focused) onSelectBlock(focused.blockId);
        e.preventDefault();
        return;
      case 'Escape':
        setFocused(undefined);
        return;
      default:
        return;
    }
    e.preventDefault();
    if (next) setFocused(next);
  });

  return {
    update(nextBackup, nextBlocks) {
      backup = nextBackup;
      blocks = nextBlocks;
      schedule(true);
    },
    destroy() {
      clearInterval(tick);
      cancelAnimationFrame(frame);
      resize.disconnect();
      scheme.removeEventListener('change', onScheme);
      if (window.__stowageTimeline?.backup === backup?.name) window.__stowageTimeline = undefined;
    },
  };
}
