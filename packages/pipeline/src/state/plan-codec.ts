import { createHash } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { mapInTurns } from '../in-turns.js';

/*
 * How a block's plan and item manifests are stored: one value per block (field <blockId> of
 * `K:plan`), the JSON `{"plan":…,"items":…}` compressed with deflate. Blocks of one backup are
 * alike (the same kinds, labels, reasons, field names), so a backup's values are compressed
 * against a dictionary learned from its own first blocks (stored once in `K:dict`): about 8% of
 * the JSON, against about 30% for each value deflated alone (measured on the bench's pods).
 *
 * What a manifest already says is not stored twice: an entry of plan.items that its manifest
 * (same index) rebuilds exactly is stored as its groupResource alone (see packItems).
 *
 * The first byte says the format, so a worker reads what any version wrote:
 * - `{`    plain JSON of the plan alone, its manifests in `K:items` (before the codec; read only,
 *          for backups planned before an upgrade and still running)
 * - 0x01   deflate-raw of the JSON
 * - 0x02   8 bytes of dictionary id, then deflate-raw of the JSON with that dictionary
 * Anything else is refused with a clear error (written by a newer Stowage).
 */

export const PLAN_FORMAT_LEGACY_JSON = 0x7b; // '{'
export const PLAN_FORMAT_DEFLATE = 0x01;
export const PLAN_FORMAT_DICTIONARY = 0x02;
const DICTIONARY_ID_BYTES = 8;
/**
 * About one block's worth: measured, 24 KiB compressed the bench's blocks only 3% better than one
 * block (2.7 KiB). zlib hashes the whole dictionary on every call, so its size is most of a small
 * block's encoding cost: 4 KiB took 36 µs of CPU per pod block against 46 µs with 8 KiB, for the
 * same size (87 against 86 bytes).
 */
const DICTIONARY_MAX_BYTES = 4 * 1024;
/** A batch with less JSON than this is deflated without a dictionary (storing one would cost more than it saves). */
const LEARN_MIN_BYTES = 8 * 1024;
/** Blocks of a batch (beyond those a new dictionary is learned from) on which the two dictionaries are compared. */
const COMPARE_SAMPLE_BLOCKS = 16;
/**
 * Blocks serialised between two event-loop turns. A plan's encoding is its largest synchronous
 * work (a batch of 500 pod blocks held the event loop 0.3–0.8 s at 20k pods): another backup's
 * plan in the same process waited that long at each of its awaits (issue #23, fairness).
 */
const BLOCKS_PER_TURN = 50;

export interface PlanDictionary {
  /** Hex of the id bytes: the field in `K:dict`. */
  id: string;
  bytes: Buffer;
}

export class PlanFormatError extends Error {
  override readonly name = 'PlanFormatError';
}

function dictionaryOf(bytes: Buffer): PlanDictionary {
  return { id: createHash('sha256').update(bytes).digest().subarray(0, DICTIONARY_ID_BYTES).toString('hex'), bytes };
}

interface ManifestLike {
  apiVersion?: unknown;
  kind?: unknown;
  metadata?: { namespace?: unknown; name?: unknown };
}

/**
 * The plan item a manifest stands for, built as the planner builds it (same fields, same order),
 * as JSON would have it: no undefined field.
 */
function itemOf(groupResource: string, manifest: ManifestLike | null | undefined): Record<string, unknown> | undefined {
  const meta = manifest?.metadata;
  if (!manifest || !meta || typeof meta.name !== 'string') return undefined;
  const namespace = typeof meta.namespace === 'string' ? meta.namespace : undefined;
  const item: Record<string, unknown> = { key: `${groupResource}/${namespace ?? '-cluster-'}/${meta.name}` };
  if (manifest.apiVersion !== undefined) item.apiVersion = manifest.apiVersion;
  if (manifest.kind !== undefined) item.kind = manifest.kind;
  item.groupResource = groupResource;
  if (namespace !== undefined) item.namespace = namespace;
  item.name = meta.name;
  return item;
}

/** plan.items with each entry its manifest rebuilds exactly (JSON-equal) replaced by its groupResource. */
function packItems(plan: unknown, items: unknown): unknown {
  const planned = (plan as { items?: unknown } | null)?.items;
  if (!Array.isArray(planned) || !Array.isArray(items)) return plan;
  const packed = planned.map((entry, i) => {
    const groupResource = (entry as { groupResource?: unknown } | null)?.groupResource;
    if (typeof groupResource !== 'string') return entry;
    const rebuilt = itemOf(groupResource, items[i] as ManifestLike);
    return rebuilt && JSON.stringify(rebuilt) === JSON.stringify(entry) ? groupResource : entry;
  });
  return { ...(plan as object), items: packed };
}

function unpackItems(plan: unknown, items: unknown): unknown {
  const planned = (plan as { items?: unknown } | null)?.items;
  if (!Array.isArray(planned) || !Array.isArray(items)) return plan;
  const unpacked = planned.map((entry, i) => {
    if (typeof entry !== 'string') return entry;
    const rebuilt = itemOf(entry, items[i] as ManifestLike);
    if (!rebuilt) throw new PlanFormatError(`stored block plan item ${i} (${entry}) has no manifest to rebuild it from`);
    return rebuilt;
  });
  return { ...(plan as object), items: unpacked };
}

/*
 * Deflate is synchronous on purpose: zlib's asynchronous calls cost far more for values this
 * small (a stream each; tried: 33 s of the event loop's CPU in zlib over the 20k-pod huge bench,
 * against 6 s). Instead, a batch lets the event loop go every BLOCKS_PER_TURN blocks.
 */
function encodeWith(json: Buffer, dictionary: PlanDictionary | undefined): Buffer {
  if (!dictionary) return Buffer.concat([Buffer.of(PLAN_FORMAT_DEFLATE), deflateRawSync(json)]);
  return Buffer.concat([
    Buffer.of(PLAN_FORMAT_DICTIONARY),
    Buffer.from(dictionary.id, 'hex'),
    deflateRawSync(json, { dictionary: dictionary.bytes }),
  ]);
}

/**
 * Encodes the blocks of one plan run, batch by batch, keeping the dictionary it learned. A new
 * dictionary is returned with the batch that first uses it, to be stored in the same write.
 * Batches of one encoder are encoded one at a time (the plan awaits each before the next).
 */
export class BlockPlanEncoder {
  private dictionary: PlanDictionary | undefined;

  async encodeBatch(blocks: ReadonlyArray<{ plan: unknown; items: unknown }>): Promise<{ values: Buffer[]; dictionary?: PlanDictionary }> {
    const jsons = await mapInTurns(blocks, BLOCKS_PER_TURN, (b) =>
      Buffer.from(JSON.stringify({ plan: packItems(b.plan, b.items), items: b.items })),
    );
    const rawBytes = jsons.reduce((n, j) => n + j.length, 0);
    const current = this.dictionary;
    if (rawBytes >= LEARN_MIN_BYTES) {
      const { candidate, learnedFrom } = learnDictionary(jsons);
      // The first dictionary is learned at once; a later one (the blocks changed kind: the first
      // blocks planned are those with volumes) only when it saves more than it costs to store.
      if (!current || savesMoreThanItCosts(jsons, learnedFrom, current, candidate)) {
        this.dictionary = candidate;
        return { values: await mapInTurns(jsons, BLOCKS_PER_TURN, (j) => encodeWith(j, candidate)), dictionary: candidate };
      }
    }
    return { values: await mapInTurns(jsons, BLOCKS_PER_TURN, (j) => encodeWith(j, current)) };
  }
}

/** A dictionary from the batch's first blocks, and how many blocks it took. */
function learnDictionary(jsons: readonly Buffer[]): { candidate: PlanDictionary; learnedFrom: number } {
  let bytes = 0;
  let learnedFrom = 0;
  while (learnedFrom < jsons.length && bytes < DICTIONARY_MAX_BYTES) bytes += jsons[learnedFrom++]?.length ?? 0;
  return { candidate: dictionaryOf(Buffer.concat(jsons.slice(0, learnedFrom)).subarray(0, DICTIONARY_MAX_BYTES)), learnedFrom };
}

/** Compared on blocks the candidate was not learned from, extrapolated to the batch. */
function savesMoreThanItCosts(jsons: readonly Buffer[], learnedFrom: number, current: PlanDictionary, candidate: PlanDictionary): boolean {
  const sample = jsons.slice(Math.max(learnedFrom, jsons.length - COMPARE_SAMPLE_BLOCKS));
  if (sample.length === 0) return false;
  let saved = 0;
  for (const j of sample) saved += encodeWith(j, current).length - encodeWith(j, candidate).length;
  return (saved / sample.length) * jsons.length > candidate.bytes.length;
}

/** The dictionary id a stored value needs (undefined: none). */
export function dictionaryIdOf(value: Buffer): string | undefined {
  if (value[0] !== PLAN_FORMAT_DICTIONARY) return undefined;
  if (value.length < 1 + DICTIONARY_ID_BYTES) throw new PlanFormatError('stored block plan is truncated (no dictionary id)');
  return value.subarray(1, 1 + DICTIONARY_ID_BYTES).toString('hex');
}

/**
 * Decodes a stored value. `legacy: true` when it is the old plain plan JSON (its manifests are in
 * `K:items`). `dictionary` must be the one dictionaryIdOf(value) names, when it names one.
 */
export function decodeStoredBlock<P, I>(value: Buffer, dictionary?: Buffer): { plan: P; items: I | undefined; legacy: boolean } {
  const format = value[0];
  switch (format) {
    case PLAN_FORMAT_LEGACY_JSON:
      return { plan: JSON.parse(value.toString('utf8')) as P, items: undefined, legacy: true };
    case PLAN_FORMAT_DEFLATE:
      return unpacked<P, I>(inflateRawSync(value.subarray(1)));
    case PLAN_FORMAT_DICTIONARY: {
      if (!dictionary) throw new PlanFormatError(`stored block plan needs dictionary ${dictionaryIdOf(value)}, which is missing`);
      return unpacked<P, I>(inflateRawSync(value.subarray(1 + DICTIONARY_ID_BYTES), { dictionary }));
    }
    default:
      throw new PlanFormatError(
        `stored block plan has an unknown format (first byte 0x${(format ?? 0).toString(16).padStart(2, '0')}): written by a newer Stowage? Run workers of that version`,
      );
  }
}

function unpacked<P, I>(json: Buffer): { plan: P; items: I; legacy: false } {
  const stored = JSON.parse(json.toString('utf8')) as { plan: unknown; items: I };
  return { plan: unpackItems(stored.plan, stored.items) as P, items: stored.items, legacy: false };
}
