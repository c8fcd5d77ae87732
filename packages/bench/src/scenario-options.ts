/**
 * The argument parsing the scenarios with options of their own (restore, freeze) share: their
 * integer flags, the report files, --keep-logs and --help. Each scenario parses its other flags.
 */

export interface ScenarioBenchOptions<S> {
  scenario: S;
  json: string | undefined;
  /** Where to write the Markdown report too (it is always printed); undefined = nowhere. */
  markdown: string | undefined;
  keepLogs: boolean;
}

export type ScenarioParseResult<O> = { ok: true; options: O } | { ok: false; problems: string[] } | { ok: 'help' };

export interface ScenarioArgs<S, O extends ScenarioBenchOptions<S>> {
  /** The --scenario value, named in the unknown-option problem. */
  name: string;
  /** The defaults, filled in place. */
  options: O;
  /** Integer flags: the scenario field each sets and its least value. */
  intFlags: Record<string, { key: keyof S; min: number }>;
  /** One of the scenario's own flags: takes its value with next(); false when the flag is not one of them. */
  parseFlag?(flag: string, next: () => string | undefined, problems: string[]): boolean;
  /** Checks across flags, once all are read. */
  check?(problems: string[]): void;
}

/** Parses argv (after the script name, with `--scenario <name>` anywhere); every problem is reported at once. */
export function parseScenarioArgs<S, O extends ScenarioBenchOptions<S>>(
  argv: readonly string[],
  spec: ScenarioArgs<S, O>,
): ScenarioParseResult<O> {
  const { options, intFlags } = spec;
  const problems: string[] = [];
  // pnpm passes a separating `--` through to the script: ignore it.
  const args = argv.filter((a) => a !== '--');
  const at = args.indexOf('--scenario');
  if (at >= 0) args.splice(at, 2);
  for (let i = 0; i < args.length; i++) {
    const flag = args[i] ?? '';
    const next = () => args[++i];
    if (flag === '-h' || flag === '--help') return { ok: 'help' };
    const int = intFlags[flag];
    if (int) {
      const v = next();
      const n = Number(v);
      if (v === undefined || !Number.isInteger(n) || n < int.min)
        problems.push(`${flag} needs an integer >= ${int.min}, got ${v ?? 'nothing'}`);
      else options.scenario[int.key] = n as never;
      continue;
    }
    switch (flag) {
      case '--json':
      case '--markdown': {
        const v = next();
        if (!v || v.startsWith('--')) problems.push(`${flag} needs a file name`);
        else if (flag === '--json') options.json = v;
        else options.markdown = v;
        break;
      }
      case '--keep-logs':
        options.keepLogs = true;
        break;
      default:
        if (!spec.parseFlag?.(flag, next, problems)) problems.push(`unknown option ${flag} (for --scenario ${spec.name})`);
    }
  }
  spec.check?.(problems);
  return problems.length > 0 ? { ok: false, problems } : { ok: true, options };
}
