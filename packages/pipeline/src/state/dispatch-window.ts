import type { Redis } from 'ioredis';
import type { BackupState } from './backup-state.js';

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
 *
 * At-least-once: a claim is recorded under the claimer's key (the finishing block, or the plan's
 * batch), so a claimer that dies after claiming and is run again adds the same blocks again (job
 * ids are deterministic: a no-op when they exist). What no claimer added (it failed for good in
 * between) is found by finalize's backstop: blocks past the cursor, and claimed blocks that never
 * started.
 */
export const DISPATCH_WINDOW_SCRIPTS = {
  /**
   * Claims the blocks to add now.
   * KEYS[1] K:win, KEYS[2] K:wclaim, KEYS[3] K:border, KEYS[4] K:plan.
   * ARGV[1] claimer key, ARGV[2] '1' when the claimer is a block that ends now (frees a place;
   * it claims only when a tenth of the cap is free, or all that is left fits).
   * Returns {id1, plan1, id2, plan2, …} (stored plans, '' when missing); the same list on a re-run.
   */
  stowageWindowClaim: {
    numberOfKeys: 4,
    lua: `
local prev = redis.call('HGET', KEYS[2], ARGV[1])
local ids
if prev then
  ids = cjson.decode(prev)
else
  local w = redis.call('HMGET', KEYS[1], 'cap', 'cursor', 'inflight')
  local cap = tonumber(w[1] or '0')
  local cursor = tonumber(w[2] or '0')
  local inflight = tonumber(w[3] or '0')
  if ARGV[2] == '1' and inflight > 0 then inflight = inflight - 1 end
  local total = redis.call('LLEN', KEYS[3])
  local n = math.min(cap - inflight, total - cursor)
  -- A block that ends refills only once a tenth of the window is free (or all that is left fits):
  -- one add of many blocks, not one add per block. plan (ARGV[2] '0') fills whatever is free.
  if ARGV[2] == '1' and n < math.min(math.max(1, math.floor(cap / 10)), total - cursor) then n = 0 end
  ids = {}
  if n > 0 then
    ids = redis.call('LRANGE', KEYS[3], cursor, cursor + n - 1)
    cursor = cursor + #ids
    inflight = inflight + #ids
  end
  redis.call('HSET', KEYS[1], 'cursor', cursor, 'inflight', inflight)
  if #ids == 0 then redis.call('HSET', KEYS[2], ARGV[1], '[]')
  else redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(ids)) end
end
local out = {}
-- HMGET in chunks: unpack() of a long list overflows Lua's stack.
for start = 1, #ids, 1000 do
  local stop = math.min(start + 999, #ids)
  local plans = redis.call('HMGET', KEYS[4], unpack(ids, start, stop))
  for i = start, stop do
    out[#out + 1] = ids[i]
    out[#out + 1] = plans[i - start + 1] or ''
  end
end
return out`,
  },
  /**
   * finalize's backstop: the blocks no claimer added. Blocks past the cursor, and claimed blocks
   * with no live state (never started), except those a backstop added before (never twice: a job
   * that fails before writing its state must not loop finalize).
   * KEYS[1] K:win, KEYS[2] K:wclaim, KEYS[3] K:border, KEYS[4] K:plan. ARGV[1] block-state key
   * prefix (`K:b:`). Returns {id1, plan1, …} and claims them under `backstop`.
   */
  stowageWindowBackstop: {
    numberOfKeys: 4,
    lua: `
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
if total > cursor then
  for _, id in ipairs(redis.call('LRANGE', KEYS[3], cursor, total - 1)) do missing[#missing + 1] = id end
end
redis.call('HSET', KEYS[1], 'cursor', total)
if #missing == 0 then return {} end
local all = {}
for id in pairs(before) do all[#all + 1] = id end
for _, id in ipairs(missing) do all[#all + 1] = id end
redis.call('HSET', KEYS[2], 'backstop', cjson.encode(all))
redis.call('HINCRBY', KEYS[1], 'inflight', #missing)
redis.call('HINCRBY', KEYS[1], 'backstops', 1)
local out = {}
for _, id in ipairs(missing) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[4], id) or ''
end
return out`,
  },
} as const;

interface WindowScriptCommands {
  stowageWindowClaimBuffer(win: string, claims: string, order: string, plan: string, claimer: string, endsBlock: string): Promise<Buffer[]>;
  stowageWindowBackstopBuffer(win: string, claims: string, order: string, plan: string, blockPrefix: string): Promise<Buffer[]>;
}

export interface ClaimedBlock<P = unknown> {
  id: string;
  plan: P | undefined;
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

  private keys(name: string): [string, string, string, string] {
    return [this.state.key(name, 'win'), this.state.key(name, 'wclaim'), this.state.key(name, 'border'), this.state.key(name, 'plan')];
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
    const [win, claims, order, plan] = this.keys(name);
    return await this.pairs<P>(name, await this.redis.stowageWindowClaimBuffer(win, claims, order, plan, claimer, endsBlock ? '1' : '0'));
  }

  /** finalize's backstop: the blocks nobody added (see DISPATCH_WINDOW_SCRIPTS.stowageWindowBackstop). */
  async backstop<P = unknown>(name: string): Promise<Array<ClaimedBlock<P>>> {
    const [win, claims, order, plan] = this.keys(name);
    return await this.pairs<P>(name, await this.redis.stowageWindowBackstopBuffer(win, claims, order, plan, this.state.key(name, 'b:')));
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

  /** `{id1, stored plan 1, id2, …}` as the scripts return it (stored plans are binary: plan-codec.ts). */
  private async pairs<P>(name: string, flat: Buffer[]): Promise<Array<ClaimedBlock<P>>> {
    const ids: string[] = [];
    const values: Buffer[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      ids.push((flat[i] ?? Buffer.alloc(0)).toString('utf8'));
      values.push(flat[i + 1] ?? Buffer.alloc(0));
    }
    const plans = await this.state.decodePlans<P>(name, values);
    return ids.map((id, i) => ({ id, plan: plans[i] }));
  }

  async drop(name: string): Promise<void> {
    await this.redis.unlink(this.state.key(name, 'win'), this.state.key(name, 'wclaim'));
  }
}
