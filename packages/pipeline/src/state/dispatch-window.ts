import type { Redis } from 'ioredis';
import { type BackupState, type BlockStep, SHAPE_PAIR, SHAPE_SOLO } from './backup-state.js';
import { lateCountRefused } from './run-state.js';
import { BLOCK_STEP_LUA } from './scripts.js';

/**
 * A backup's dispatch window (fairness between backups): with a cap N, at most N of its blocks are
 * in the queues at a time (added and not yet finished); each block that finishes adds the next
 * ones, in plan order (in batches of a tenth of the window). A small backup submitted while a huge one runs then waits behind at most N
 * blocks of it, not behind all of them (BullMQ OSS has no per-group limit, so the window is ours).
 *
 * Keys (K = `<prefix>:bk:{<name>}`, the backup's hash tag, so every script runs on Redis Cluster):
 * - `K:border`  list  block ids in plan order (BackupState's): the window's queue
 * - `K:win`     hash  `cap`, `cursor` (next index into K:border), `inflight`, `backstops`
 * - `K:wclaim`  hash  claimer key → JSON array of the block ids it claimed (a re-run gets the same)
 * - `K:shape`, `K:plan` (BackupState's): what a claimed block is added as, solo or the pair
 *
 * At-least-once: a claim is recorded under the claimer's key (the finishing block, or the plan's
 * batch), so a claimer that dies after claiming and is run again adds the same blocks again (job
 * ids are deterministic: a no-op when they exist). What no claimer added (it failed for good in
 * between) is found by finalize's backstop: blocks past the cursor, and claimed blocks that never
 * started.
 */
/**
 * Lua: `shapedBlocks(ids, shapes, planKey)` → {id1, shape1, plan1, …}: shape i is byte i of
 * `shapes` when it is `s` or `p`, else '' with the stored plan in its place (HMGET of those
 * alone, in chunks: unpack() of a long list overflows Lua's stack).
 */
const SHAPED_BLOCKS_LUA = `
local function shapedBlocks(ids, shapes, planKey)
  local out = {}
  local unknown = {}
  for i, id in ipairs(ids) do
    local shape = string.sub(shapes, i, i)
    if shape ~= 's' and shape ~= 'p' then
      shape = ''
      unknown[#unknown + 1] = i
    end
    out[#out + 1] = id
    out[#out + 1] = shape
    out[#out + 1] = ''
  end
  for start = 1, #unknown, 1000 do
    local stop = math.min(start + 999, #unknown)
    local fields = {}
    for j = start, stop do fields[#fields + 1] = ids[unknown[j]] end
    local plans = redis.call('HMGET', planKey, unpack(fields))
    for j = start, stop do out[3 * unknown[j]] = plans[j - start + 1] or '' end
  end
  return out
end
`;

/**
 * Lua: `windowClaim(win, wclaims, order, plan, shape, claimer, endsBlock)`, the body of
 * stowageWindowClaim (see there).
 */
const WINDOW_CLAIM_LUA = `${SHAPED_BLOCKS_LUA}
local function windowClaim(win, wclaims, order, plan, shape, claimer, endsBlock)
  local prev = redis.call('HGET', wclaims, claimer)
  local ids
  local shapes = ''
  if prev then
    ids = cjson.decode(prev)
  else
    local w = redis.call('HMGET', win, 'cap', 'cursor', 'inflight')
    local cap = tonumber(w[1] or '0')
    local cursor = tonumber(w[2] or '0')
    local inflight = tonumber(w[3] or '0')
    if endsBlock == '1' and inflight > 0 then inflight = inflight - 1 end
    local total = redis.call('LLEN', order)
    local n = math.min(cap - inflight, total - cursor)
    -- A block that ends refills only once a tenth of the window is free (or all that is left fits):
    -- one add of many blocks, not one add per block. plan (endsBlock '0') fills whatever is free.
    if endsBlock == '1' and n < math.min(math.max(1, math.floor(cap / 10)), total - cursor) then n = 0 end
    ids = {}
    if n > 0 then
      ids = redis.call('LRANGE', order, cursor, cursor + n - 1)
      shapes = redis.call('GETRANGE', shape, cursor, cursor + #ids - 1)
      cursor = cursor + #ids
      inflight = inflight + #ids
    end
    redis.call('HSET', win, 'cursor', cursor, 'inflight', inflight)
    if #ids == 0 then redis.call('HSET', wclaims, claimer, '[]')
    else redis.call('HSET', wclaims, claimer, cjson.encode(ids)) end
  end
  return shapedBlocks(ids, shapes, plan)
end
`;

export const DISPATCH_WINDOW_SCRIPTS = {
  /**
   * Claims the blocks to add now.
   * KEYS[1] K:win, KEYS[2] K:wclaim, KEYS[3] K:border, KEYS[4] K:plan, KEYS[5] K:shape.
   * ARGV[1] claimer key, ARGV[2] '1' when the claimer is a block that ends now (frees a place;
   * it claims only when a tenth of the cap is free, or all that is left fits).
   * Returns {id1, shape1, plan1, id2, …}: each block's shape (\`s\`/\`p\`, see BackupState's
   * K:shape) and, only where the shape is unknown, its stored plan ('' when missing); the same
   * blocks on a re-run (then with their plans: a re-run is rare, and its indices are not kept).
   */
  stowageWindowClaim: {
    numberOfKeys: 5,
    lua: `${WINDOW_CLAIM_LUA}
return windowClaim(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2])`,
  },
  /**
   * A block-ending step (BackupState.blockStep: fields, once-counters, event) and the claim of
   * the block that ends (as stowageWindowClaim with ARGV '1'), in one round trip: what a solo
   * block of a windowed backup does last.
   * KEYS[1..4] as stowageBlockStep's, KEYS[5..9] as stowageWindowClaim's. ARGV[1], ARGV[2] as
   * stowageBlockStep's, ARGV[3] the claimer key. Returns the claim's {id1, shape1, plan1, …}.
   */
  stowageBlockStepAndClaim: {
    numberOfKeys: 9,
    lua: `${BLOCK_STEP_LUA}${WINDOW_CLAIM_LUA}
blockStep(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2])
return windowClaim(KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], ARGV[3], '1')`,
  },
  /**
   * finalize's backstop: the blocks no claimer added. Blocks past the cursor, and claimed blocks
   * with no live state (never started), except those a backstop added before (never twice: a job
   * that fails before writing its state must not loop finalize).
   * KEYS[1] K:win, KEYS[2] K:wclaim, KEYS[3] K:border, KEYS[4] K:plan, KEYS[5] K:shape.
   * ARGV[1] block-state key prefix (`K:b:`). Returns {id1, shape1, plan1, …} as the claim does,
   * and claims them under `backstop`.
   */
  stowageWindowBackstop: {
    numberOfKeys: 5,
    lua: `${SHAPED_BLOCKS_LUA}
local before = {}
local prevRaw = redis.call('HGET', KEYS[2], 'backstop')
if prevRaw then for _, id in ipairs(cjson.decode(prevRaw)) do before[id] = true end end
local missing = {}
local claims = redis.call('HGETALL', KEYS[2])
for i = 1, #claims, 2 do
  if claims[i] ~= 'backstop' then
    for _, id in ipairs(cjson.decode(claims[i + 1])) do
      if not before[id] and redis.call('EXISTS', ARGV[1] .. id) == 0 then missing[#missing + 1] = id end
    end
  end
end
local cursor = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0')
local total = redis.call('LLEN', KEYS[3])
-- Shapes are known by index: unknown ('\\0') for the claimed blocks above, then the blocks past the cursor.
local shapes = string.rep('\\0', #missing)
if total > cursor then
  for _, id in ipairs(redis.call('LRANGE', KEYS[3], cursor, total - 1)) do missing[#missing + 1] = id end
  shapes = shapes .. redis.call('GETRANGE', KEYS[5], cursor, total - 1)
end
redis.call('HSET', KEYS[1], 'cursor', total)
if #missing == 0 then return {} end
local all = {}
for id in pairs(before) do all[#all + 1] = id end
for _, id in ipairs(missing) do all[#all + 1] = id end
redis.call('HSET', KEYS[2], 'backstop', cjson.encode(all))
redis.call('HINCRBY', KEYS[1], 'inflight', #missing)
redis.call('HINCRBY', KEYS[1], 'backstops', 1)
return shapedBlocks(missing, shapes, KEYS[4])`,
  },
} as const;

interface WindowScriptCommands {
  stowageWindowClaimBuffer(
    win: string,
    claims: string,
    order: string,
    plan: string,
    shape: string,
    claimer: string,
    endsBlock: string,
  ): Promise<Buffer[]>;
  stowageWindowBackstopBuffer(
    win: string,
    claims: string,
    order: string,
    plan: string,
    shape: string,
    blockPrefix: string,
  ): Promise<Buffer[]>;
  stowageBlockStepAndClaimBuffer(...keysAndArgs: string[]): Promise<Buffer[]>;
}

export interface ClaimedBlock<P = unknown> {
  id: string;
  /** Added as one item-block job (true) or the post-hooks ← item-block pair (false), from its stored shape. */
  solo?: boolean;
  /** The block's plan, decoded only when its shape was not stored (planned by an older version). */
  plan?: P | undefined;
}

/** The dispatch window of backups (see the module comment). */
export class DispatchWindow {
  private readonly redis: Redis & WindowScriptCommands;
  constructor(private readonly state: BackupState) {
    this.redis = state.redis as Redis & WindowScriptCommands;
    for (const [name, def] of Object.entries(DISPATCH_WINDOW_SCRIPTS)) {
      if (!(name in this.redis)) this.redis.defineCommand(name, def);
    }
  }

  private keys(name: string): [string, string, string, string, string] {
    return [
      this.state.key(name, 'win'),
      this.state.key(name, 'wclaim'),
      this.state.key(name, 'border'),
      this.state.key(name, 'plan'),
      this.state.key(name, 'shape'),
    ];
  }

  /** Opens the window with its cap (kept if it was opened before: a re-run of plan changes nothing). */
  async open(name: string, cap: number): Promise<void> {
    if (!Number.isInteger(cap) || cap < 1) throw new Error(`dispatch window cap must be an integer >= 1, got ${cap}`);
    await this.redis.hsetnx(this.state.key(name, 'win'), 'cap', cap);
  }

  /**
   * The blocks `claimer` is to add now (up to the cap, in plan order). `endsBlock`: the claimer is
   * a finishing block (its place is freed first). Idempotent per claimer key.
   */
  async claim<P = unknown>(name: string, claimer: string, endsBlock: boolean): Promise<Array<ClaimedBlock<P>>> {
    const [win, claims, order, plan, shape] = this.keys(name);
    return await this.blocks<P>(
      name,
      await this.redis.stowageWindowClaimBuffer(win, claims, order, plan, shape, claimer, endsBlock ? '1' : '0'),
    );
  }

  /**
   * BackupState.blockStep of a block that ends, then claim(name, claimer, true): one script, one
   * round trip instead of two.
   */
  async stepAndClaim<P = unknown>(name: string, blockId: string, step: BlockStep, claimer: string): Promise<Array<ClaimedBlock<P>>> {
    const { keys, args } = this.state.blockStepCall(name, blockId, step);
    const flat = await this.redis
      .stowageBlockStepAndClaimBuffer(...keys, ...this.keys(name), ...args, claimer)
      .catch(lateCountRefused(name));
    return await this.blocks<P>(name, flat);
  }

  /** finalize's backstop: the blocks nobody added (see DISPATCH_WINDOW_SCRIPTS.stowageWindowBackstop). */
  async backstop<P = unknown>(name: string): Promise<Array<ClaimedBlock<P>>> {
    const [win, claims, order, plan, shape] = this.keys(name);
    return await this.blocks<P>(
      name,
      await this.redis.stowageWindowBackstopBuffer(win, claims, order, plan, shape, this.state.key(name, 'b:')),
    );
  }

  /** `cap`, `cursor`, `inflight` (undefined when the backup has no window). */
  async status(name: string): Promise<{ cap: number; cursor: number; inflight: number; backstops: number } | undefined> {
    const raw = await this.redis.hgetall(this.state.key(name, 'win'));
    if (raw.cap === undefined) return undefined;
    return {
      cap: Number(raw.cap),
      cursor: Number(raw.cursor ?? 0),
      inflight: Number(raw.inflight ?? 0),
      backstops: Number(raw.backstops ?? 0),
    };
  }

  /** `{id1, shape1, stored plan 1, id2, …}` as the scripts return it (stored plans are binary: plan-codec.ts). */
  private async blocks<P>(name: string, flat: Buffer[]): Promise<Array<ClaimedBlock<P>>> {
    const out: Array<ClaimedBlock<P>> = [];
    const unknown: number[] = [];
    for (let i = 0; i < flat.length; i += 3) {
      const id = (flat[i] ?? Buffer.alloc(0)).toString('utf8');
      const shape = (flat[i + 1] ?? Buffer.alloc(0)).toString('utf8');
      if (shape === SHAPE_SOLO || shape === SHAPE_PAIR) out.push({ id, solo: shape === SHAPE_SOLO });
      else {
        unknown.push(out.length);
        out.push({ id });
      }
    }
    if (unknown.length > 0) {
      const plans = await this.state.decodePlans<P>(
        name,
        unknown.map((i) => flat[3 * i + 2]),
      );
      unknown.forEach((at, j) => {
        const block = out[at];
        if (block) block.plan = plans[j];
      });
    }
    return out;
  }

  async drop(name: string): Promise<void> {
    await this.redis.unlink(this.state.key(name, 'win'), this.state.key(name, 'wclaim'));
  }
}
