-- Join a room's queue, idempotently.
-- KEYS[1] queue (ZSET id -> arrival seq)   KEYS[2] seq (STRING counter)   KEYS[3] dedup (HASH key -> id)
-- ARGV[1] new ticket id   ARGV[2] dedup key or ""   ARGV[3] key prefix "vestibule:{room}:"
-- ARGV[4] dedup hash TTL in seconds
-- Returns {id, created (0|1), position (-1 when the existing ticket is no longer waiting)}.
local prefix = ARGV[3]
if ARGV[2] ~= '' then
  local existing = redis.call('HGET', KEYS[3], ARGV[2])
  if existing then
    local rank = redis.call('ZRANK', KEYS[1], existing)
    if rank then
      return {existing, 0, rank + 1}
    end
    local state = redis.call('HGET', prefix .. 'ticket:' .. existing, 'state')
    -- A ticket that left or expired is no reason to refuse a fresh place at the back.
    if state == 'TOKEN_ISSUED' or state == 'COMPLETED' then
      return {existing, 0, -1}
    end
  end
end
local seq = redis.call('INCR', KEYS[2])
-- NX: a join never moves an existing member (ids are fresh random, so this is belt and braces).
redis.call('ZADD', KEYS[1], 'NX', seq, ARGV[1])
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[1])
  redis.call('EXPIRE', KEYS[3], ARGV[4])
end
return {ARGV[1], 1, redis.call('ZRANK', KEYS[1], ARGV[1]) + 1}
