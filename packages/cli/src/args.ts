import { type ParseArgsConfig, parseArgs } from 'node:util';
import { stringify as toYaml } from 'yaml';
import { CliError, CliErrorCode, ExitCode } from './errors.js';

/*
 * The command line of every verb: one parser (node:util parseArgs, strict), one way to say a flag
 * is wrong (one line naming it, exit 2), one `-o json|yaml|table`.
 */

type Options = NonNullable<ParseArgsConfig['options']>;

/** Flags every verb takes. */
export const COMMON_OPTIONS = {
  output: { type: 'string', short: 'o' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies Options;

/**
 * `--flag=false` / `--flag=true` for a boolean flag, as Velero (cobra) accepts them: parseArgs
 * knows only `--flag` and `--no-flag`.
 */
function normaliseBooleans(argv: readonly string[], options: Options): string[] {
  return argv.map((arg) => {
    const m = /^--([^=]+)=(true|false)$/.exec(arg);
    if (!m || options[m[1] as string]?.type !== 'boolean') return arg;
    return m[2] === 'true' ? `--${m[1]}` : `--no-${m[1]}`;
  });
}

/** parseArgs' message, cut to one line that names the flag. */
function flagProblem(err: Error, what: string): string {
  const message = err.message.split('. To specify')[0]?.split('\n')[0] ?? err.message;
  const unknown = /^Unknown option '([^']+)'/.exec(message);
  if (unknown) return `${what}: unknown flag ${unknown[1]}; see "stowage ${what} --help"`;
  const needsValue = /^Option '([^']+)' argument missing/.exec(message);
  if (needsValue) return `${what}: flag ${needsValue[1]?.replace(/^-\w, /, '').replace(/ <value>$/, '')} needs a value`;
  const noValue = /^Option '([^']+)' does not take an argument/.exec(message);
  if (noValue) return `${what}: flag ${noValue[1]?.replace(/^-\w, /, '')} takes no value (use --flag or --flag=false)`;
  return `${what}: ${message}`;
}

export interface ParsedCommand<O extends Options> {
  values: { [K in keyof O]?: O[K] extends { type: 'boolean' } ? boolean : string } & {
    output?: string;
    json?: boolean;
    help?: boolean;
  };
  positionals: string[];
}

/**
 * Parses one verb's flags. `allowed` lists the flags this verb takes (beyond output, json, help):
 * any other known flag is refused by name, as an unknown one is.
 */
export function parseCommand<O extends Options>(
  what: string,
  argv: readonly string[],
  options: O,
  allowed: readonly string[],
): ParsedCommand<O> {
  const all = { ...options, ...COMMON_OPTIONS };
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({ args: normaliseBooleans(argv, all), options: all, allowPositionals: true, allowNegative: true, strict: true });
  } catch (err) {
    throw new CliError(CliErrorCode.usage, flagProblem(err as Error, what));
  }
  const wrong = Object.keys(parsed.values).filter((flag) => !(flag in COMMON_OPTIONS) && !allowed.includes(flag));
  if (wrong.length > 0) throw new CliError(CliErrorCode.usage, `${what}: does not take ${wrong.map((f) => `--${f}`).join(', ')}`);
  return parsed as ParsedCommand<O>;
}

/** A command group's verb table: each verb and the flags it takes. */
export interface VerbGroup<O extends Options> {
  /** `backup`, `restore`, … */
  group: string;
  usage: string;
  options: O;
  allowed: Readonly<Record<string, readonly string[]>>;
}

/**
 * `stowage <group> <verb> …`: the verb and its flags, or the exit code once only the usage was
 * asked for (printed). No verb prints the usage and is a usage error; an unknown verb is refused.
 */
export function parseVerb<O extends Options>(
  argv: readonly string[],
  verbs: VerbGroup<O>,
  stdout: { write(text: string): unknown },
): { exitCode: number } | (ParsedCommand<O> & { command: string; what: string }) {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    stdout.write(`${verbs.usage}\n`);
    return { exitCode: command === undefined ? ExitCode.usage : ExitCode.ok };
  }
  const allowed = verbs.allowed[command];
  if (!allowed)
    throw new CliError(
      CliErrorCode.usage,
      `unknown ${verbs.group} command ${JSON.stringify(command)}; see "stowage ${verbs.group} --help"`,
    );
  const what = `${verbs.group} ${command}`;
  const parsed = parseCommand(what, rest, verbs.options, allowed);
  if (parsed.values.help) {
    stdout.write(`${verbs.usage}\n`);
    return { exitCode: ExitCode.ok };
  }
  return { ...parsed, command, what };
}

export type OutputFormat = 'table' | 'json' | 'yaml';

/** `-o json|yaml|table` (default table); `--json` is `-o json`. */
export function outputFormatOf(values: { output?: string | undefined; json?: boolean | undefined }, what: string): OutputFormat {
  const o = values.output ?? (values.json ? 'json' : 'table');
  if (o === 'text') return 'table';
  if (o !== 'json' && o !== 'yaml' && o !== 'table')
    throw new CliError(CliErrorCode.usage, `${what}: flag -o/--output must be json, yaml or table, got ${JSON.stringify(o)}`);
  if (values.json && o !== 'json') throw new CliError(CliErrorCode.usage, `${what}: --json and -o ${o} contradict each other`);
  return o;
}

/** A value as JSON or YAML (the `yaml` library, so any value a server sends prints as valid YAML). */
export function serialise(format: 'json' | 'yaml', value: unknown): string {
  return format === 'json' ? JSON.stringify(value, null, 2) : toYaml(value, { lineWidth: 0 }).trimEnd();
}

/** Prints `value` as asked: JSON, YAML, or the lines a person reads. */
export function printAs(format: OutputFormat, value: unknown, table: () => readonly string[], out: (line: string) => void): void {
  if (format === 'table') for (const line of table()) out(line);
  else out(serialise(format, value));
}

/** `a,b , c` → ['a','b','c']. */
export const csv = (value: string): string[] =>
  value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);

/**
 * `k=v,k2=v2` (Velero's --labels / --annotations) → a map. A key without `=` or an empty key is
 * a usage error naming the flag.
 */
export function keyValues(flag: string, value: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of csv(value)) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new CliError(CliErrorCode.usage, `--${flag}: "${pair}" is not key=value`);
    out[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return out;
}

/** `--limit N` of a list verb: the API's page size bounds (1 to 1000). */
export function pageLimitOf(value: string | undefined, what: string): number | undefined {
  const limit = value === undefined ? undefined : Number(value);
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1 || limit > 1000))
    throw new CliError(CliErrorCode.usage, `${what}: flag --limit must be a whole number from 1 to 1000, got ${JSON.stringify(value)}`);
  return limit;
}

/** The one name a verb takes as its argument. */
export function oneName(positionals: readonly string[], what: string, example: string): string {
  const [name, ...more] = positionals;
  if (!name) throw new CliError(CliErrorCode.usage, `${what}: give the name, e.g. "stowage ${what} ${example}"`);
  if (more.length > 0) throw new CliError(CliErrorCode.usage, `${what}: one name only, got ${positionals.join(' ')}`);
  return name;
}
