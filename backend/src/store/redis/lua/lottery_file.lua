-- File waiting tickets into a random room's lottery (docs/DESIGN.md "Random queueing"): one
-- batch of a switch to random, whose keys the caller computed from the seed (Lua has no HMAC).
-- KEYS[1] queue   KEYS[2] settings   KEYS[3] lottery (ZSET, scores 0)   KEYS[4] lottery_mac (HASH
-- id -> member)   KEYS[5] lottery_filing   KEYS[6] prequeue (SET)
-- ARGV[1] "1" = the caller's scan of the queue ends with this batch   ARGV[2..] pairs: ticket id,
-- its member (`hex(HMAC-SHA256(seed, tag)) .. tag .. id`).
-- A ticket is filed only if it still waits (not in the pre-queue) and is not filed yet; a ticket
-- that left meanwhile is skipped, one that joined meanwhile filed itself (join.lua). After the
-- last batch lottery_filing is deleted if the lottery holds every waiting ticket; else it stays
-- (a skipped ticket came back unfiled behind the scan) and the leader's next tick files again.
-- Returns {filed, done (1|0)}, or {-1, 0} when the room is not random any more.
-- KEYS[7] gone (the room's tombstone): a deleted room is not random any more either (its keys are
-- being purged: a ticket filed behind the purge's SCAN would outlive it).
if redis.call('HGET', KEYS[2], 'qmethod') ~= 'random' or redis.call('EXISTS', KEYS[7]) == 1 then
  return {-1, 0}
end
local filed = 0
for i = 2, #ARGV - 1, 2 do
  local id = ARGV[i]
  if redis.call('ZSCORE', KEYS[1], id) and redis.call('HEXISTS', KEYS[4], id) == 0
      and redis.call('SISMEMBER', KEYS[6], id) == 0 then
    redis.call('ZADD', KEYS[3], 0, ARGV[i + 1])
    redis.call('HSET', KEYS[4], id, ARGV[i + 1])
    filed = filed + 1
  end
end
local done = 0
if ARGV[1] == '1' and redis.call('ZCARD', KEYS[1]) - redis.call('SCARD', KEYS[6]) == redis.call('ZCARD', KEYS[3]) then
  redis.call('DEL', KEYS[5])
  done = 1
end
return {filed, done}
