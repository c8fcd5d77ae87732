/*
 * Namespace include/exclude patterns validated as Velero validates them. Cases and names from
 * Velero's TestValidateNamespaceIncludesExcludes (pkg/util/collections) and TestValidateBracePatterns
 * (pkg/util/wildcard), ported as facts: the lists in, whether the spec is rejected.
 */
import { describe, expect, it } from 'vitest';
import { validateBackupRequest } from './backup-spec.schema.js';
import { isNamespaceIncluded } from './resource-selection.js';

const problemsOf = (includes: string[], excludes: string[] = []) => {
  const res = validateBackupRequest({ spec: { includedNamespaces: includes, excludedNamespaces: excludes } });
  return res.ok ? [] : res.problems;
};

describe('namespace include/exclude validation (Velero TestValidateNamespaceIncludesExcludes)', () => {
  it.each<[string, string[], string[], boolean]>([
    ["empty slice doesn't return error", [], [], false],
    ['asterisk by itself is valid', ['*'], [], false],
    [
      'alphanumeric names with optional dash inside are valid',
      ['foobar', 'bar-321', 'foo123bar'],
      ['123bar', 'barfoo', 'foo-321', 'bar123foo'],
      false,
    ],
    ['not starting or ending with an alphanumeric character is invalid', ['-123foo'], ['foo321-', 'foo321-'], true],
    ['special characters in name is invalid', ['foo?', 'foo.bar', 'bar_321'], ['$foo', 'foo>bar', 'bar=321'], true],
    ['empty includes (everything) is valid', [], [], false],
    ['empty string includes is valid (includes nothing)', [''], [], false],
    ['empty string excludes is valid (excludes nothing)', [], [''], false],
    ['include everything using asterisk is valid', ['*'], [], false],
    ['excludes can contain wildcard', ['foo', 'bar'], ['nginx-ingress-*', '*-bar', '*-ingress-*'], false],
    ['includes can contain wildcard', ['*-foo', 'kube-*', '*kube*'], ['bar'], false],
    ['include everything not allowed with other includes', ['*', 'foo'], [], true],
    ['exclude everything not allowed', ['foo'], ['*'], true],
    ['excludes cannot contain items in includes', ['foo', 'bar'], ['bar'], true],
    ['glob characters in includes should not error', ['kube-*', 'test-?', 'ns-[0-9]'], [], false],
    ['glob characters in excludes should not error', ['default'], ['test-*', 'app-?', 'ns-[1-5]'], false],
    ['character class in includes should not error', ['ns-[abc]', 'test-[0-9]'], [], false],
    ['mixed glob patterns should not error', ['kube-*', 'test-?'], ['*-test', 'debug-[0-9]'], false],
    ['pipe character in includes should error', ['namespace|other'], [], true],
    ['parentheses in includes should error', ['namespace(prod)', 'test-(dev)'], [], true],
    ['exclamation mark in includes should error', ['!namespace', 'test!'], [], true],
    ['unsupported characters in excludes should error', ['default'], ['test|prod', 'app(staging)'], true],
    // Stowage's own: '**' anywhere, and a negated class (Velero rejects '!' anywhere)
    ['consecutive asterisks are rejected', ['kube-**'], [], true],
    ['a negated class is rejected like any "!"', ['ns-[!a]'], [], true],
    ['longer than 63 characters after substitution', [`${'a'.repeat(62)}-*`], [], true],
  ])('%s', (_name, includes, excludes, rejected) => {
    expect(problemsOf(includes, excludes).length > 0).toBe(rejected);
  });
});

describe('bracket patterns (Velero TestValidateBracePatterns)', () => {
  it.each<[string, string, boolean]>([
    ['valid square bracket pattern', 'ns[abc]', false],
    ['valid square bracket pattern with range', 'ns[a-z]', false],
    ['valid square bracket pattern with numbers', 'ns[0-9]', false],
    ['valid square bracket pattern with mixed', 'ns[a-z0-9]', false],
    ['valid square bracket pattern with single character', 'ns[a]', false],
    ['valid square bracket pattern with text before and after', 'prefix-[abc]-suffix', false],
    ['unclosed opening bracket at end', 'ns[abc', true],
    ['unclosed opening bracket at start', '[abc', true],
    ['unclosed opening bracket in middle', 'ns[abc-test', true],
    ['unmatched closing bracket at end', 'ns-abc]', true],
    ['unmatched closing bracket at start', ']ns-abc', true],
    ['unmatched closing bracket in middle', 'ns-]abc', true],
    ['extra closing bracket after valid pair', 'ns[abc]]', true],
    ['completely empty brackets', 'ns[]', true],
    ['empty brackets at start', '[]ns', true],
    ['empty brackets standalone', '[]', true],
    ['empty pattern', '', false],
  ])('%s', (_name, pattern, rejected) => {
    expect(problemsOf([pattern]).length > 0).toBe(rejected);
  });
});

describe('the problems say what is wrong', () => {
  it.each<[string, RegExp]>([
    ['kube-**', /"kube-\*\*" contains '\*\*'/],
    ['ns[]', /empty bracket pattern '\[\]'/],
    ['!prod', /"!prod" contains '!'/],
    ['Prod_NS', /"Prod_NS" is not a namespace name or pattern: must be lowercase/],
  ])('%s', (pattern, message) => {
    expect(problemsOf([pattern]).map((p) => `${p.path}: ${p.message}`)).toEqual(expect.arrayContaining([expect.stringMatching(message)]));
    expect(problemsOf([pattern]).every((p) => p.path === 'spec.includedNamespaces[0]')).toBe(true);
  });

  it('an empty string names no namespace', () => {
    expect(isNamespaceIncluded('default', { includedNamespaces: [''], excludedNamespaces: [] })).toBe(false);
    expect(isNamespaceIncluded('default', { includedNamespaces: ['*'], excludedNamespaces: [''] })).toBe(true);
  });
});
