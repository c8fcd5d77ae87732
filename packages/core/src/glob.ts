/*
 * Namespace globs as Velero accepts them (gobwas/glob without separators): `*` any run of
 * characters, `?` one character, `[abc]` / `[a-z]` / `[!abc]` a class. Everything else is literal.
 */
const compiled = new Map<string, RegExp>();

export type GlobCheck = { ok: true } | { ok: false; message: string };

export function checkGlob(pattern: string): GlobCheck {
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i];
    if (char === '[') {
      if (inClass) return { ok: false, message: `${JSON.stringify(pattern)} has a '[' inside a character class` };
      inClass = true;
    } else if (char === ']') {
      if (!inClass) return { ok: false, message: `${JSON.stringify(pattern)} has a ']' without a matching '['` };
      inClass = false;
    }
  }
  if (inClass) return { ok: false, message: `${JSON.stringify(pattern)} has a '[' that is never closed` };
  return { ok: true };
}

export function isGlob(pattern: string): boolean {
  return /[*?[]/.test(pattern);
}

function compile(pattern: string): RegExp {
  let source = '';
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i] ?? '';
    if (inClass) {
      if (char === ']') {
        source += ']';
        inClass = false;
      } else if (char === '\\' || char === '^') {
        source += `\\${char}`;
      } else {
        source += char;
      }
    } else if (char === '*') {
      source += '.*';
    } else if (char === '?') {
      source += '.';
    } else if (char === '[') {
      inClass = true;
      source += '[';
      if (pattern[i + 1] === '!') {
        source += '^';
        i++;
      }
    } else {
      source += char.replace(/[.+^${}()|\\\]]/g, '\\$&');
    }
  }
  return new RegExp(`^${source}$`);
}

/** True when `value` matches the glob `pattern` (an invalid pattern matches only itself). */
export function matchGlob(pattern: string, value: string): boolean {
  if (!isGlob(pattern)) return pattern === value;
  if (!checkGlob(pattern).ok) return pattern === value;
  let regex = compiled.get(pattern);
  if (!regex) {
    regex = compile(pattern);
    if (compiled.size > 1000) compiled.clear(); // bounded memo: patterns come from specs, few and repeated
    compiled.set(pattern, regex);
  }
  return regex.test(value);
}

/**
 * A matcher for "any of these patterns": plain names in one set lookup, only the globs tested one
 * by one. A spec's namespace lists hold up to a thousand entries, tested against every namespace
 * the plan meets.
 */
export function globListMatcher(patterns: readonly string[]): (value: string) => boolean {
  const names = new Set<string>();
  const globs: RegExp[] = [];
  for (const pattern of patterns) {
    if (!isGlob(pattern) || !checkGlob(pattern).ok) names.add(pattern);
    else globs.push(compile(pattern));
  }
  return (value) => names.has(value) || globs.some((glob) => glob.test(value));
}

/** A DNS-1123 label (without its 63-character bound): a namespace name that is no pattern. */
const PLAIN_NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * Velero's namespace-pattern rules (`ValidateNamespaceIncludesExcludes`): `""` is accepted (it
 * names no namespace); `|()!{},` and `**` are rejected, and so are empty, unclosed and unmatched
 * brackets; what is left after each `*?[]` becomes a letter must be a DNS-1123 label. Each
 * problem is one sentence naming the pattern.
 */
export function namespacePatternProblems(pattern: string, explainLabel: (value: string) => string[]): string[] {
  // The common case, a plain name, in one test (a spec may list tens of thousands of them).
  if (pattern === '' || (pattern.length <= 63 && PLAIN_NAMESPACE.test(pattern))) return [];
  const quoted = JSON.stringify(pattern);
  const unsupported = [...new Set(pattern.replace(/[^|()!{},]/g, ''))];
  if (unsupported.length > 0) {
    return [
      `${quoted} contains ${unsupported.map((c) => `'${c}'`).join(', ')}: namespace patterns support only *, ? and [...] (no |, (, ), !, {, }, ,)`,
    ];
  }
  if (pattern.includes('**')) return [`${quoted} contains '**': use a single '*' (it already matches any run of characters)`];
  if (/\[\]/.test(pattern)) return [`${quoted} contains an empty bracket pattern '[]'`];
  const glob = checkGlob(pattern);
  if (!glob.ok) return [glob.message];
  const asName = pattern.replace(/[*?[\]]/g, 'x');
  return explainLabel(asName).map((problem) => `${quoted} is not a namespace name or pattern: ${problem}`);
}
