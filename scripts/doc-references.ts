/**
 * Finds references that do not resolve inside the repository: a link or path to a Markdown file
 * that does not exist, an anchor (`file.md#heading`) that is no heading of that file, and any
 * pointer at the design notes and Velero references kept outside the repository. Used by
 * doc-references.test.ts; each problem names the file, the line and the reference.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

export interface BrokenReference {
  file: string;
  line: number;
  reference: string;
  problem: string;
}

/** Documents outside the repository that comments used to cite; their facts now live in docs/. */
const OUTSIDE_DOCUMENTS: { pattern: RegExp; instead: string }[] = [
  { pattern: new RegExp(`${'DESIGN'}(?:\\.md)?\\s*§\\s*\\d+(?:\\.\\d+)*`, 'g'), instead: 'docs/architecture.md#…' },
  { pattern: /\bDESIGN\.md\b/g, instead: 'docs/architecture.md#…' },
  { pattern: new RegExp(`\\b${'velero'}-(?:semantics|restore)(?:\\.md)?(?:\\s*§\\s*[\\d.]+)?`, 'g'), instead: 'docs/velero.md#…' },
  { pattern: /\bVelero\s+§\s*\d+(?:\.\d+)*/g, instead: 'docs/velero.md#…' },
  { pattern: /(?<![\w/.-])reference\/[\w-]+\.md\b/g, instead: 'docs/velero.md#…' },
];

/** A Markdown link or image target: `[text](target)` / `![alt](target "title")`. */
const MARKDOWN_LINK = /!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g;
/** A path to a Markdown file written out in prose or a comment, with an optional anchor. */
const MARKDOWN_PATH = /(?<![\w/.@:-])((?:\.{1,2}\/)*(?:[\w-]+\/)*[\w.-]+\.md)(#[\w-]+)?(?![\w/])/g;

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
export function headingSlug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

const anchorsCache = new Map<string, Set<string>>();

/** Every anchor a Markdown file's headings produce (duplicates get -1, -2, … as on GitHub). */
export function markdownAnchors(path: string): Set<string> {
  const cached = anchorsCache.get(path);
  if (cached) return cached;
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!heading?.[1]) continue;
    const slug = headingSlug(heading[1]);
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  anchorsCache.set(path, anchors);
  return anchors;
}

function isFile(path: string): boolean {
  return existsSync(path) && statSync(path).isFile();
}

/** Checks one reference `target` (a path, maybe with `#anchor`) written in `file` (repo-relative). */
function checkTarget(root: string, file: string, target: string, fromRootToo: boolean): string | undefined {
  const hash = target.indexOf('#');
  const pathPart = decodeURI(hash < 0 ? target : target.slice(0, hash));
  const anchor = hash < 0 ? undefined : target.slice(hash + 1);
  let resolved: string;
  if (pathPart === '') {
    resolved = join(root, file);
  } else {
    const besideFile = normalize(join(root, dirname(file), pathPart));
    const fromRoot = normalize(join(root, pathPart));
    const candidates = fromRootToo && !pathPart.startsWith('.') ? [besideFile, fromRoot] : [besideFile];
    const found = candidates.find((c) => relative(root, c).startsWith('..') === false && existsSync(c));
    if (!found) return `${pathPart} does not exist in the repository`;
    resolved = found;
  }
  if (anchor === undefined || anchor === '') return undefined;
  if (!resolved.endsWith('.md') || !isFile(resolved)) return undefined;
  if (!markdownAnchors(resolved).has(anchor.toLowerCase())) {
    return `${relative(root, resolved)} has no heading #${anchor}`;
  }
  return undefined;
}

/** Every broken reference in the given repo-relative files. */
export function findBrokenReferences(root: string, files: readonly string[]): BrokenReference[] {
  const problems: BrokenReference[] = [];
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    const isMarkdown = file.endsWith('.md');
    let fenced = false;
    text.split('\n').forEach((line, index) => {
      const at = { file, line: index + 1 };
      for (const { pattern, instead } of OUTSIDE_DOCUMENTS) {
        for (const match of line.matchAll(pattern)) {
          problems.push({ ...at, reference: match[0], problem: `points at a document outside the repository; cite ${instead}` });
        }
      }
      if (isMarkdown && /^\s*(```|~~~)/.test(line)) fenced = !fenced;
      if (fenced) return;
      const checked = new Set<string>();
      if (isMarkdown) {
        for (const match of line.matchAll(MARKDOWN_LINK)) {
          const target = match[1] ?? '';
          checked.add(target);
          if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, mailto:, …
          const problem = checkTarget(root, file, target, false);
          if (problem) problems.push({ ...at, reference: match[0], problem });
        }
      }
      for (const match of line.matchAll(MARKDOWN_PATH)) {
        const target = `${match[1]}${match[2] ?? ''}`;
        if (checked.has(target) || [...checked].some((c) => c.endsWith(target))) continue;
        // A bare file name is prose ("the package README.md"); a path or an anchor is a reference.
        if (!match[1]?.includes('/') && !match[2]) continue;
        const problem = checkTarget(root, file, target, true);
        if (problem) problems.push({ ...at, reference: target, problem });
      }
    });
  }
  return problems;
}

export function formatBrokenReferences(problems: readonly BrokenReference[]): string {
  return problems.map((p) => `${p.file}:${p.line}: ${p.reference} — ${p.problem}`).join('\n');
}
