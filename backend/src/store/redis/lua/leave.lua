-- Leave a room: a waiting ticket leaves the queue; a ticket holding a token gives it back.
-- KEYS[1] queue   KEYS[2] active   KEYS[3] left (LIST of arrival seqs)   KEYS[4] left_count
-- ARGV[1] ticket id   ARGV[2] now ms   ARGV[3] keep ms   ARGV[4] key prefix
-- KEYS[5] prequeue (SET: a pre-queue ticket leaves it too)   KEYS[6] prequeue_order (ZSET)
-- KEYS[7] prequeue_mac (HASH id -> its member of prequeue_order): an undrawn ticket leaves the
-- drawn order too (join.lua, draw.lua)
-- Returns {outcome, state}: outcome LEFT, ENDED (state says which) or NOT_FOUND.
-- A waiting leaver's seq is appended to `left` (the last 10,000 are kept) and `left_count`
-- counted, so SSE hubs can move everyone behind up without re-reading their positions; its
-- last-heard slot is cleared. A skipped ticket within its hold (HELD) leaves too.
-- KEYS[10] gone (the room's tombstone): a deleted room, whose keys are being purged, is written
-- no more (a leaver's slot or `left` entry written behind the purge's SCAN would outlive it): its
-- tickets are NOT_FOUND.
if redis.call('EXISTS', KEYS[10]) == 1 then
  return {'NOT_FOUND', ''}
end
local prefix = ARGV[4]
local key = prefix .. 'ticket:' .. ARGV[1]
local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
if seq then
  redis.call('ZREM', KEYS[1], ARGV[1])
  if redis.call('SREM', KEYS[5], ARGV[1]) == 1 then
    local member = redis.call('HGET', KEYS[7], ARGV[1])
    if member then
      redis.call('ZREM', KEYS[6], member)
      redis.call('HDEL', KEYS[7], ARGV[1])
    end
  end
  -- A random room's ticket leaves the lottery too (KEYS[8] lottery, KEYS[9] lottery_mac).
  local lot = redis.call('HGET', KEYS[9], ARGV[1])
  if lot then
    redis.call('ZREM', KEYS[8], lot)
    redis.call('HDEL', KEYS[9], ARGV[1])
  end
  local n = tonumber(seq)
  redis.call('BITFIELD', prefix .. 'seen:' .. math.floor(n / 65536), 'SET', 'u32', '#' .. (n % 65536), 0)
  redis.call('RPUSH', KEYS[3], seq)
  redis.call('LTRIM', KEYS[3], -10000, -1)
  redis.call('INCR', KEYS[4])
  redis.call('HSET', key, 'state', 'LEFT')
  redis.call('PEXPIRE', key, ARGV[3])
  return {'LEFT', 'LEFT'}
end
local ticket = redis.call('HMGET', key, 'state', 'tok', 'exp')
if not ticket[1] then
  return {'NOT_FOUND', ''}
end
if ticket[1] == 'TOKEN_ISSUED' and tonumber(ticket[3]) > tonumber(ARGV[2]) then
  redis.call('HSET', key, 'state', 'LEFT')
  redis.call('PEXPIRE', key, ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('DEL', prefix .. 'token:' .. string.match(ticket[2], '([^.]+)$'))
  return {'LEFT', 'LEFT'}
end
if ticket[1] == 'HELD' and tonumber(ticket[3]) > tonumber(ARGV[2]) then
  redis.call('HSET', key, 'state', 'LEFT')
  redis.call('PEXPIRE', key, ARGV[3])
  return {'LEFT', 'LEFT'}
end
if ticket[1] == 'TOKEN_ISSUED' or ticket[1] == 'HELD' then
  return {'ENDED', 'EXPIRED'}
end
return {'ENDED', ticket[1]}
