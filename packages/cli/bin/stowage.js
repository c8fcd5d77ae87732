#!/usr/bin/env node
// `stowage`: runs the TypeScript CLI (src/main.ts) in this process through tsx, with the
// workspace `@stowage/source` export condition added by a small resolve hook (what
// `--conditions=@stowage/source` does), so nothing has to be built first.
import { register } from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';

// Hooks registered later run first: ours adds the condition, then tsx resolves and compiles.
registerTsx();
const addSourceCondition = `export async function resolve(specifier, context, next) {
  const conditions = context.conditions.includes('@stowage/source') ? context.conditions : [...context.conditions, '@stowage/source'];
  return next(specifier, { ...context, conditions });
}`;
register(`data:text/javascript,${encodeURIComponent(addSourceCondition)}`);
await import(new URL('../src/main.ts', import.meta.url).href);
