/**
 * Lua scripts of the backup state module. Each documents its KEYS and ARGV; each touches only
 * keys of one backup (same hash tag) so it runs on Redis Cluster.
 */
/**
 * Lua: `countOnce(onceKey, countersKey, entries, single)` counts each `[onceKey, field, increment]`
 * entry once per key. Entries sharing a field and an increment go in one variadic SADD, and the
 * keys it added now in one HINCRBY (two commands for a block's items, not two per item). The entry
 * at index `single` (0 = none) is counted on its own, so the caller knows whether it counted now.
 * Returns the number of keys counted now and whether the single entry counted.
 */
const COUNT_ONCE_LUA = `
local function countOnce(onceKey, countersKey, entries, single)
  local counted = 0
  local singleCounted = false
  local groups = {}
  local order = {}
  for i, e in ipairs(entries) do
    if i == single then
      if redis.call('SADD', onceKey, e[1]) == 1 then
        redis.call('HINCRBY', countersKey, e[2], e[3])
        counted = counted + 1
        singleCounted = true
      end
    else
      local g = e[2] .. '\0' .. tostring(e[3])
      if not groups[g] then
        groups[g] = { field = e[2], by = e[3], keys = {} }
        order[#order + 1] = g
      end
      local keys = groups[g].keys
      keys[#keys + 1] = e[1]
    end
  end
  for _, g in ipairs(order) do
    local group = groups[g]
    local added = 0
    -- unpack() takes a few thousand values at most: a namespace's block can hold more items.
    for from = 1, #group.keys, 1000 do
      added = added + redis.call('SADD', onceKey, unpack(group.keys, from, math.min(from + 999, #group.keys)))
    end
    if added > 0 then
      redis.call('HINCRBY', countersKey, group.field, added * group.by)
      counted = counted + added
    end
  end
  return counted, singleCounted
end
`;

/**
 * Lua: `blockStep(blockKey, onceKey, countersKey, eventsKey, stepJson, maxLen)`, the body of
 * stowageBlockStep (see there); also run by the dispatch window's step-and-claim script.
 */
export const BLOCK_STEP_LUA = `${COUNT_ONCE_LUA}
local function blockStep(blockKey, onceKey, countersKey, eventsKey, stepJson, maxLen)
  local step = cjson.decode(stepJson)
  local ev = step.event
  local counted, eventKeyCounted = 0, false
  -- Counted first: once a finalize dropped the run, the once-set is a string and this fails before any write.
  if step.once then counted, eventKeyCounted = countOnce(onceKey, countersKey, step.once, ev and ev.ifCounted or 0) end
  if step.set and #step.set > 0 then redis.call('HSET', blockKey, unpack(step.set)) end
  if ev and (ev.ifCounted == 0 or eventKeyCounted) then
    redis.call('XADD', eventsKey, 'MAXLEN', '~', maxLen, '*', 'type', ev.type, 'at', tostring(ev.at), 'data', ev.data)
  end
  return counted
end
`;

export const BACKUP_STATE_SCRIPTS = {
  /**
   * Creates the backup record unless it exists.
   * KEYS[1] record hash. ARGV[1..] field/value pairs. Returns 1 when created, 0 when it existed.
   * (The index zset lives in another slot, so it is written by a separate, idempotent ZADD NX.)
   */
  stowageCreateBackup: {
    numberOfKeys: 1,
    lua: `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1`,
  },
  /**
   * Adds a finished run (backup or restore) found in storage to the catalogue unless a record of
   * that name exists (sync: what Redis knows always wins). KEYS[1] record hash, KEYS[2] counters hash.
   * ARGV[1] number of record field/value pairs n, ARGV[2..2n+1] record pairs, then counter pairs.
   * Returns 1 when added; 2 when a catalogue entry of that name exists (archived); 0 when some
   * other record of that name exists (a running run, or a stray write after Redis was emptied).
   */
  stowageCatalogueRun: {
    numberOfKeys: 2,
    lua: `
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HEXISTS', KEYS[1], 'archivedAt') == 1 then return 2 end
  return 0
end
local n = tonumber(ARGV[1])
local rec = {}
for i = 2, 2 * n + 1 do rec[#rec + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(rec))
redis.call('DEL', KEYS[2])
if #ARGV > 2 * n + 1 then
  local cnt = {}
  for i = 2 * n + 2, #ARGV do cnt[#cnt + 1] = ARGV[i] end
  redis.call('HSET', KEYS[2], unpack(cnt))
end
return 1`,
  },
  /**
   * Compare-and-set of the phase.
   * KEYS[1] record hash. ARGV[1] new phase, ARGV[2] JSON array of allowed current phases,
   * ARGV[3..] extra field/value pairs set together with the phase.
   * Returns {1, previous} when moved, {0, current} otherwise.
   */
  stowageTransitionPhase: {
    numberOfKeys: 1,
    lua: `
local cur = redis.call('HGET', KEYS[1], 'phase')
if not cur then return {0, false} end
local allowed = cjson.decode(ARGV[2])
for _, p in ipairs(allowed) do
  if p == cur then
    redis.call('HSET', KEYS[1], 'phase', ARGV[1])
    if #ARGV > 2 then
      local fields = {}
      for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
      redis.call('HSET', KEYS[1], unpack(fields))
    end
    return {1, cur}
  end
end
return {0, cur}`,
  },
  /**
   * Counts once per key.
   * KEYS[1] once set, KEYS[2] counters hash. ARGV[1] once key, ARGV[2] field, ARGV[3] increment.
   * Returns 1 when counted, 0 when the key was counted before.
   */
  stowageCountOnce: {
    numberOfKeys: 2,
    lua: `
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], ARGV[2], ARGV[3])
return 1`,
  },
  /**
   * countOnce, and a log line appended when it counted: one round trip, and the line is never
   * lost between the two. KEYS[1] once set, KEYS[2] counters hash, KEYS[3] log list.
   * ARGV[1] once key, ARGV[2] counter field, ARGV[3] increment, ARGV[4] the log line (JSON),
   * ARGV[5] how many log lines are kept (trimmed only once the list is longer: one command less
   * per line until then). Returns 1 when it counted now, else 0.
   */
  stowageCountOnceAndLog: {
    numberOfKeys: 3,
    lua: `
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], ARGV[2], ARGV[3])
local keep = tonumber(ARGV[5])
if redis.call('RPUSH', KEYS[3], ARGV[4]) > keep then redis.call('LTRIM', KEYS[3], -keep, -1) end
return 1`,
  },
  /**
   * Stores block plans (each with its item manifests, encoded by plan-codec.ts) and the dictionary
   * they need, in one step (a plan never names a dictionary that is not stored); appends to the
   * order list only the ids not seen before. A block stored before keeps its value. With the
   * order list, the shape string: byte i is the shape of block i of the order list (`s` solo,
   * `p` post-hooks pair; a zero byte: unknown), so the dispatch window adds blocks without
   * decoding their plans, at one byte per block. Written only with the plan itself, so a shape
   * always describes the stored plan.
   * KEYS[1] plan hash, KEYS[2] order list, KEYS[3] dictionary hash, KEYS[4] shape string.
   * ARGV[1] JSON array of ids (n), ARGV[2] their shapes, one character per id ('' = unknown),
   * ARGV[3..n+2] the values, then optionally ARGV[n+3] a dictionary id and ARGV[n+4] its bytes.
   */
  stowagePutPlans: {
    numberOfKeys: 4,
    lua: `
local ids = cjson.decode(ARGV[1])
local n = #ids
local shapes = ARGV[2]
if #ARGV >= n + 4 then redis.call('HSET', KEYS[3], ARGV[n + 3], ARGV[n + 4]) end
local firstIndex = -1
local added = {}
for i = 1, n do
  if redis.call('HSETNX', KEYS[1], ids[i], ARGV[i + 2]) == 1 then
    local len = redis.call('RPUSH', KEYS[2], ids[i])
    if firstIndex < 0 then firstIndex = len - 1 end
    added[#added + 1] = string.sub(shapes, i, i)
  end
end
-- The ids pushed now are consecutive in the order list: their shapes are one range.
if firstIndex >= 0 and #shapes == n then redis.call('SETRANGE', KEYS[4], firstIndex, table.concat(added)) end
return n`,
  },
  /**
   * Counts many keys once each.
   * KEYS[1] once set, KEYS[2] counters hash. ARGV[1] JSON array of [onceKey, field, increment].
   * Returns the number of keys counted now.
   */
  stowageCountOnceMany: {
    numberOfKeys: 2,
    lua: `${COUNT_ONCE_LUA}
local counted = countOnce(KEYS[1], KEYS[2], cjson.decode(ARGV[1]), 0)
return counted`,
  },
  /**
   * Registers a PVB as pending unless it is known already (a re-run must not reset a phase).
   * KEYS[1] PVB hash, KEYS[2] PVB name set. ARGV[1] PVB name, ARGV[2..] field/value pairs.
   * Returns 1 when registered now, 0 when it existed.
   */
  stowageRegisterPvb: {
    numberOfKeys: 2,
    lua: `
redis.call('SADD', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
return 1`,
  },
  /**
   * What an item-block job starts from, in one round trip (a script, not a pipeline: building an
   * ioredis pipeline copies every script BullMQ defined on the connection, which cost more CPU
   * than the round trips it saved).
   * KEYS[1] record hash, KEYS[2] plan hash, KEYS[3] block hash, KEYS[4] items hash (only backups
   * planned before plan-codec.ts have one: read only for a plan in that format, plain JSON).
   * ARGV[1] block id.
   * Returns {the record's name, cancelRequestedAt and fsDeadlineAt (HMGET: not the whole record,
   * whose spec and plan summary a block does not need), stored plan or '', block flat list, items
   * JSON or ''}.
   */
  stowageReadBlock: {
    numberOfKeys: 4,
    lua: `
local plan = redis.call('HGET', KEYS[2], ARGV[1]) or ''
local items = ''
if string.sub(plan, 1, 1) == '{' then items = redis.call('HGET', KEYS[4], ARGV[1]) or '' end
return { redis.call('HMGET', KEYS[1], 'name', 'cancelRequestedAt', 'fsDeadlineAt'), plan, redis.call('HGETALL', KEYS[3]), items }`,
  },
  /**
   * What a block's post-hooks step starts from, in one round trip: the plan, the live state and
   * the state of every PVB the block names (the block's `pvbs` field, a JSON list).
   * KEYS[1] plan hash, KEYS[2] block hash (every PVB key shares their hash tag). ARGV[1] block id,
   * ARGV[2] the PVB key prefix (`<K>:pvb:`).
   * Returns {stored plan or '', block flat list, {PVB flat list, ...} in the block's order}.
   */
  stowageReadBlockTail: {
    numberOfKeys: 2,
    lua: `
local block = redis.call('HGETALL', KEYS[2])
local pvbs = {}
-- the block's PVB names are its 'pvbs' field, already read: no second read of the hash
for f = 1, #block, 2 do
  if block[f] == 'pvbs' then
    for i, name in ipairs(cjson.decode(block[f + 1])) do pvbs[i] = redis.call('HGETALL', ARGV[2] .. name) end
    break
  end
end
return { redis.call('HGET', KEYS[1], ARGV[1]) or '', block, pvbs }`,
  },
  /**
   * One step of a block in one round trip: sets fields of the block's hash, counts once-keys, and
   * appends an event (always, or only when a given once-key counted now).
   * KEYS[1] block hash, KEYS[2] once set, KEYS[3] counters hash, KEYS[4] event stream.
   * ARGV[1] JSON `{ set: [field, value, ...], once: [[onceKey, field, increment], ...],
   * event?: { type, at, data, ifCounted } }` (`data` a JSON string; `ifCounted` the 1-based index
   * of a once entry, 0 = always), ARGV[2] MAXLEN of the stream.
   * Returns the number of once-keys counted now.
   */
  stowageBlockStep: {
    numberOfKeys: 4,
    lua: `${BLOCK_STEP_LUA}
return blockStep(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2])`,
  },
  /**
   * registerPvb for several PVBs of one block plus the block fields naming them, atomically.
   * KEYS[1] PVB name set, KEYS[2] block hash, KEYS[3..n+2] the PVB hashes.
   * ARGV[1] JSON `{ pvbs: [[name, field, value, ...], ...], block: [field, value, ...] }` (pvbs in KEYS order).
   * Returns each PVB's hash after the call (field/value lists, in KEYS order).
   */
  stowageRegisterPvbs: {
    // No numberOfKeys: the caller passes the key count first (ioredis' dynamic-keys form).
    lua: `
local req = cjson.decode(ARGV[1])
local records = {}
if req.pvbs then
  local names = {}
  for i, p in ipairs(req.pvbs) do
    names[i] = p[1]
    if redis.call('EXISTS', KEYS[i + 2]) == 0 then
      local fields = {}
      for j = 2, #p do fields[#fields + 1] = p[j] end
      redis.call('HSET', KEYS[i + 2], unpack(fields))
      records[i] = fields -- what was just written: no read back
    else
      records[i] = redis.call('HGETALL', KEYS[i + 2])
    end
  end
  for from = 1, #names, 1000 do redis.call('SADD', KEYS[1], unpack(names, from, math.min(from + 999, #names))) end
end
if req.block and #req.block > 0 then redis.call('HSET', KEYS[2], unpack(req.block)) end
return records`,
  },
  /**
   * Records a cancel request unless the backup already ended or was asked before.
   * KEYS[1] record hash. ARGV[1] timestamp, ARGV[2] JSON array of phases that have ended.
   * Returns {1, phase} when recorded now, {0, phase} otherwise.
   */
  stowageRequestCancel: {
    numberOfKeys: 1,
    lua: `
local cur = redis.call('HGET', KEYS[1], 'phase')
if not cur then return {0, false} end
for _, p in ipairs(cjson.decode(ARGV[2])) do
  if p == cur then return {0, cur} end
end
if redis.call('HSETNX', KEYS[1], 'cancelRequestedAt', ARGV[1]) == 0 then return {0, cur} end
return {1, cur}`,
  },
} as const;
