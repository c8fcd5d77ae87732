/**
 * Lua scripts of the backup state module. Each documents its KEYS and ARGV; each touches only
 * keys of one backup (same hash tag) so it runs on Redis Cluster.
 */
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
   * Stores block plans and item manifests; appends to the order list only the ids not seen before.
   * KEYS[1] plan hash, KEYS[2] items hash, KEYS[3] order list. ARGV[1] JSON array of ids (n),
   * ARGV[2..2n+1] plan id/value pairs, ARGV[2n+2..4n+1] items id/value pairs.
   */
  stowagePutPlans: {
    numberOfKeys: 3,
    lua: `
local ids = cjson.decode(ARGV[1])
local n = #ids
for i = 1, n do
  local id = ids[i]
  local isNew = redis.call('HSETNX', KEYS[1], id, ARGV[2 * i + 1])
  redis.call('HSET', KEYS[2], id, ARGV[2 * n + 2 * i + 1])
  if isNew == 1 then redis.call('RPUSH', KEYS[3], id) end
end
return n`,
  },
  /**
   * Counts many keys once each.
   * KEYS[1] once set, KEYS[2] counters hash. ARGV[1] JSON array of [onceKey, field, increment].
   * Returns the number of keys counted now.
   */
  stowageCountOnceMany: {
    numberOfKeys: 2,
    lua: `
local entries = cjson.decode(ARGV[1])
local counted = 0
for _, e in ipairs(entries) do
  if redis.call('SADD', KEYS[1], e[1]) == 1 then
    redis.call('HINCRBY', KEYS[2], e[2], e[3])
    counted = counted + 1
  end
end
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
