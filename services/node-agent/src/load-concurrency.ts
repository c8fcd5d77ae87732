import { checkLabelSelector, type LabelSelector, matchesLabelSelector } from '@stowage/core';

/**
 * Velero's node-agent `loadConcurrency` (docs/velero.md#node-agent-load-concurrency): how many PVBs may be InProgress at
 * once on a node. `globalConfig` missing or ≤ 0 means 1; a node matching several `perNodeConfig`
 * rules gets the smallest number; rules with an invalid selector or a number ≤ 0 are ignored
 * (reported as warnings, as Velero logs them, rather than refusing to start).
 */
export interface LoadConcurrencyConfig {
  globalConfig?: number;
  perNodeConfig?: { nodeSelector: LabelSelector; number: number }[];
}

export type ParsedLoadConcurrency = { ok: true; config: LoadConcurrencyConfig; warnings: string[] } | { ok: false; problems: string[] };

export const DEFAULT_LOAD_CONCURRENCY = 1;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Validates untrusted JSON text. The whole document may be the `loadConcurrency` object itself or a
 * Velero node-agent ConfigMap value that holds it under `loadConcurrency`.
 */
export function parseLoadConcurrency(text: string, source: string): ParsedLoadConcurrency {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    return { ok: false, problems: [`${source} is not valid JSON: ${(error as Error).message}`] };
  }
  if (isRecord(raw) && isRecord(raw.loadConcurrency)) raw = raw.loadConcurrency;
  if (!isRecord(raw)) {
    return { ok: false, problems: [`${source} must be a JSON object like {"globalConfig": 1, "perNodeConfig": [...]}`] };
  }
  const problems: string[] = [];
  const warnings: string[] = [];
  for (const key of Object.keys(raw)) {
    // prepareQueueLength belongs to Velero's expose stage; Stowage has none, so it is accepted and unused.
    if (key !== 'globalConfig' && key !== 'perNodeConfig' && key !== 'prepareQueueLength') {
      problems.push(`${source}.${key}: unknown field; expected globalConfig and perNodeConfig`);
    }
  }
  const config: LoadConcurrencyConfig = {};
  if (raw.globalConfig !== undefined) {
    if (typeof raw.globalConfig !== 'number' || !Number.isInteger(raw.globalConfig)) {
      problems.push(`${source}.globalConfig must be a whole number (PVBs in progress at once per node); default 1`);
    } else if (raw.globalConfig <= 0) {
      warnings.push(`${source}.globalConfig is ${raw.globalConfig}; values ≤ 0 mean the default, 1`);
    } else {
      config.globalConfig = raw.globalConfig;
    }
  }
  if (raw.perNodeConfig !== undefined) {
    if (!Array.isArray(raw.perNodeConfig)) {
      problems.push(`${source}.perNodeConfig must be an array of {nodeSelector, number}`);
    } else {
      config.perNodeConfig = [];
      raw.perNodeConfig.forEach((rule: unknown, index: number) => {
        const at = `${source}.perNodeConfig[${index}]`;
        if (!isRecord(rule)) {
          problems.push(`${at} must be an object {nodeSelector, number}`);
          return;
        }
        const selectorProblems = checkLabelSelector(rule.nodeSelector ?? {});
        if (selectorProblems.length > 0) {
          const first = selectorProblems[0]!;
          warnings.push(`${at} is ignored: nodeSelector${first.path.map((p) => `.${p}`).join('')} ${first.message}`);
          return;
        }
        if (typeof rule.number !== 'number' || !Number.isInteger(rule.number) || rule.number <= 0) {
          warnings.push(`${at} is ignored: number must be a whole number above 0`);
          return;
        }
        config.perNodeConfig!.push({ nodeSelector: (rule.nodeSelector ?? {}) as LabelSelector, number: rule.number });
      });
    }
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, config, warnings };
}

/** How many PVBs may be InProgress at once on a node with these labels. */
export function resolveLoadConcurrency(config: LoadConcurrencyConfig, nodeLabels: Readonly<Record<string, string>> | undefined): number {
  let smallest: number | undefined;
  for (const rule of config.perNodeConfig ?? []) {
    if (!(Number.isInteger(rule.number) && rule.number > 0)) continue;
    if (!matchesLabelSelector(rule.nodeSelector, nodeLabels)) continue;
    if (smallest === undefined || rule.number < smallest) smallest = rule.number;
  }
  if (smallest !== undefined) return smallest;
  const global = config.globalConfig;
  return global !== undefined && Number.isInteger(global) && global > 0 ? global : DEFAULT_LOAD_CONCURRENCY;
}
