// The per-block table: pods, PVBs and hook runs (exit code, duration, output tail), paginated so
// 2,000 blocks never mean 2,000 rows in the DOM. It is also the timeline's table alternative.

import { formatBytes, formatDuration, h, phaseBadge } from './format.js';

const PAGE_ROWS = 25;

function matches(block, needle) {
  if (!needle) return true;
  const hay = [
    block.id,
    block.state,
    ...block.pods,
    ...block.podVolumeBackups.flatMap((p) => [p.name, p.node, p.volume, p.phase]),
    ...block.hookRuns.map((r) => `${r.phase} ${r.pod} ${r.container}`),
  ]
    .join(' ')
    .toLowerCase();
  return hay.includes(needle);
}

function pvbCell(p) {
  const dur = p.startTimestamp
    ? formatDuration((p.completionTimestamp ? Date.parse(p.completionTimestamp) : Date.now()) - Date.parse(p.startTimestamp))
    : '–';
  const bytes = p.totalBytes !== undefined ? `${formatBytes(p.bytesDone)} / ${formatBytes(p.totalBytes)}` : formatBytes(p.bytesDone);
  return h(
    'li',
    {},
    phaseBadge(p.phase),
    ' ',
    h('strong', {}, p.volume),
    ` on ${p.node} · ${bytes} · ${dur}`,
    p.message ? h('div', { class: 'muted small' }, p.message) : null,
  );
}

/** One hook run (also used for the backup-level hooks): phase, where, result, try n of m, command, output. */
export function hookCell(r, key, openKeys) {
  const ok = r.outcome === 'exited' && r.exitCode === 0;
  const result = r.outcome === 'exited' ? `exit ${r.exitCode}` : r.outcome;
  const tail = [
    r.stdoutTail ? `stdout:\n${r.stdoutTail}` : '',
    r.stderrTail ? `stderr:\n${r.stderrTail}` : '',
    r.message ? `message: ${r.message}` : '',
  ]
    .filter(Boolean)
    .join('\n\n');
  const details = tail
    ? h('details', { 'data-key': key, open: openKeys.has(key) }, h('summary', {}, 'output'), h('pre', { class: 'hook-output' }, tail))
    : null;
  return h(
    'li',
    {},
    h('span', { class: `hook-phase hook-${r.phase}` }, r.phase),
    ' ',
    r.hookName ? h('strong', {}, `${r.hookName} `) : null,
    `${r.pod} (${r.container}) `,
    // A hook still running is neither good nor bad yet.
    h('span', { class: ok ? 'ok' : r.outcome === 'running' ? 'muted' : 'bad' }, result),
    r.try !== undefined && r.tries !== undefined ? ` · try ${r.try} of ${r.tries}` : '',
    ` · ${formatDuration(r.durationMs)}`,
    h('div', { class: 'muted small mono' }, r.command.join(' ')),
    details,
  );
}

/** Mounts the table into `container`; returns `{ update(blocks, total), showBlock(id) }`. */
export function createBlocksTable(container) {
  const filter = h('input', {
    type: 'search',
    id: 'block-filter',
    placeholder: 'block, pod, node, volume, state…',
    'aria-controls': 'blocks-table',
  });
  const status = h('p', { class: 'muted small', 'aria-live': 'polite' });
  const prev = h('button', { type: 'button' }, '← Previous');
  const next = h('button', { type: 'button' }, 'Next →');
  const pageInfo = h('span', { class: 'page-info' });
  const tbody = h('tbody');
  const table = h(
    'table',
    { id: 'blocks-table', class: 'blocks' },
    h('caption', { class: 'visually-hidden' }, 'Item blocks with their pods, PVBs and hook runs'),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, '#'),
        h('th', { scope: 'col' }, 'Block'),
        h('th', { scope: 'col' }, 'State'),
        h('th', { scope: 'col' }, 'Items'),
        h('th', { scope: 'col' }, 'PVBs'),
        h('th', { scope: 'col' }, 'Hook runs'),
      ),
    ),
    tbody,
  );
  container.append(
    h('div', { class: 'table-tools' }, h('label', { for: 'block-filter' }, 'Filter blocks '), filter, status),
    h('div', { class: 'table-scroll' }, table),
    h('nav', { class: 'pager', 'aria-label': 'Block pages' }, prev, pageInfo, next),
  );

  let blocks = [];
  let total = 0;
  let page = 0;
  let highlight;
  let lastSignature = '';
  const openKeys = new Set();

  const rowsOf = () => {
    const needle = filter.value.trim().toLowerCase();
    const out = [];
    blocks.forEach((b, i) => {
      if (b && matches(b, needle)) out.push([i, b]);
    });
    return out;
  };

  function render(force = false) {
    const rows = rowsOf();
    const pages = Math.max(1, Math.ceil(rows.length / PAGE_ROWS));
    page = Math.min(page, pages - 1);
    const visible = rows.slice(page * PAGE_ROWS, (page + 1) * PAGE_ROWS);
    // Only touch the DOM when what is shown changed: keeps focus and open <details> stable while live.
    const signature = JSON.stringify([page, highlight, visible]);
    if (!force && signature === lastSignature) return;
    lastSignature = signature;
    for (const d of tbody.querySelectorAll('details')) {
      if (d.open) openKeys.add(d.dataset.key);
      else openKeys.delete(d.dataset.key);
    }
    tbody.replaceChildren(
      ...visible.map(([i, b]) =>
        h(
          'tr',
          { id: `block-row-${i}`, class: b.id === highlight ? 'highlight' : undefined, tabindex: b.id === highlight ? '-1' : undefined },
          h('td', { class: 'num' }, String(i + 1)),
          h('th', { scope: 'row', class: 'mono' }, b.id, h('div', { class: 'muted small' }, b.pods.join(', ') || 'no pods')),
          h(
            'td',
            {},
            phaseBadge(b.state),
            b.skipped ? h('div', { class: 'bad small' }, `skipped: ${b.skipped}`) : null,
            b.error ? h('div', { class: 'bad small' }, b.error) : null,
          ),
          h('td', { class: 'num' }, `${b.itemsWritten ?? 0} / ${b.itemCount}`),
          h(
            'td',
            {},
            b.podVolumeBackups.length
              ? h('ul', { class: 'cell-list' }, b.podVolumeBackups.map(pvbCell))
              : h('span', { class: 'muted' }, 'none'),
          ),
          h(
            'td',
            {},
            b.hookRuns.length
              ? h(
                  'ul',
                  { class: 'cell-list' },
                  b.hookRuns.map((r, k) => hookCell(r, `${b.id}/${k}`, openKeys)),
                )
              : h('span', { class: 'muted' }, 'none'),
          ),
        ),
      ),
    );
    pageInfo.textContent = `Page ${page + 1} of ${pages}`;
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
    const loaded = blocks.filter(Boolean).length;
    status.textContent = `${rows.length} of ${loaded} block(s) shown${total > loaded ? ` (${total} planned, loading…)` : ''}`;
  }

  prev.addEventListener('click', () => {
    page = Math.max(0, page - 1);
    render();
  });
  next.addEventListener('click', () => {
    page++;
    render();
  });
  filter.addEventListener('input', () => {
    page = 0;
    render();
  });

  return {
    update(nextBlocks, nextTotal) {
      blocks = nextBlocks;
      total = nextTotal;
      render();
    },
    /** Shows the page holding block `id`, highlights its row and moves focus there. */
    showBlock(id) {
      filter.value = '';
      const rows = rowsOf();
      const at = rows.findIndex(([, b]) => b.id === id);
      if (at < 0) return;
      page = Math.floor(at / PAGE_ROWS);
      highlight = id;
      render(true);
      const row = tbody.querySelector('tr.highlight');
      row?.scrollIntoView({ block: 'center' });
      row?.focus({ preventScroll: true });
    },
  };
}
