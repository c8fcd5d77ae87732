// Small, pure formatting helpers and the DOM builder the views share.
// The phase lists and the byte formatter are core's, served by the api as /ui/stowage.js.
import { BACKUP_PHASES, BLOCK_STATES, formatBytes as coreFormatBytes, ENDED_BACKUP_PHASES, PVB_PHASES } from './stowage.js';

export const formatBytes = (n) => coreFormatBytes(n, '–');

export function formatDuration(ms) {
  if (ms === undefined || ms === null || !Number.isFinite(ms) || ms < 0) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m ${Math.round(s - m * 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} m`;
}

export function formatTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '–';
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  const time = d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return sameDay ? time : `${d.toLocaleDateString()} ${time}`;
}

export const ms = (iso) => (iso ? Date.parse(iso) : undefined);

export function durationOf(startIso, endIso, nowMs = Date.now()) {
  const a = ms(startIso);
  if (a === undefined || Number.isNaN(a)) return undefined;
  const b = endIso ? ms(endIso) : nowMs;
  return b - a;
}

export const TERMINAL_PHASES = new Set(ENDED_BACKUP_PHASES);

// Backups' and restores' phases, blocks' and PVBs' states (core's), and two more the styles know.
const KNOWN_PHASES = new Set([...BACKUP_PHASES, ...BLOCK_STATES, ...PVB_PHASES, 'Running', 'Done']);

/** A CSS class for a phase badge; unknown phases get the neutral one. */
export function phaseClass(phase) {
  return `phase phase-${KNOWN_PHASES.has(phase) ? phase : 'unknown'}`;
}

/**
 * `h('a', { href: '#/' , class: 'x' }, 'text', child)`: builds DOM without innerHTML, so names and
 * hook output from the API are always text, never markup.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function phaseBadge(phase) {
  return h('span', { class: phaseClass(phase) }, phase ?? '–');
}
