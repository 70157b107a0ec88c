-- Leave a room: a waiting ticket leaves the queue; a ticket holding a token gives it back.
-- KEYS: room queue active left left_count prequeue prequeue_order prequeue_mac lottery lottery_mac
-- ARGV: generation id now_ms keep_ms prefix
-- left: LIST of the arrival seqs of waiting tickets that left (the last 10,000 are kept);
-- left_count counts them, so SSE hubs can move everyone behind up without re-reading their
-- positions. prequeue, prequeue_order, prequeue_mac: an undrawn ticket leaves the drawn order too
-- (join.lua, draw.lua); lottery, lottery_mac: a random room's ticket leaves the lottery too.
-- A waiting leaver's last-heard slot is cleared. A skipped ticket within its hold (HELD) leaves
-- too.
-- Returns {outcome, state}: outcome LEFT, ENDED (state says which) or NOT_FOUND.
local refused = refusal(room, generation)
if refused then
  return refused
end
local key = prefix .. 'ticket:' .. id
local seq = redis.call('ZSCORE', queue, id)
if seq then
  redis.call('ZREM', queue, id)
  if redis.call('SREM', prequeue, id) == 1 then
    local member = redis.call('HGET', prequeue_mac, id)
    if member then
      redis.call('ZREM', prequeue_order, member)
      redis.call('HDEL', prequeue_mac, id)
    end
  end
  local lot = redis.call('HGET', lottery_mac, id)
  if lot then
    redis.call('ZREM', lottery, lot)
    redis.call('HDEL', lottery_mac, id)
  end
  local n = tonumber(seq)
  redis.call('BITFIELD', prefix .. 'seen:' .. math.floor(n / 65536), 'SET', 'u32', '#' .. (n % 65536), 0)
  redis.call('RPUSH', left, seq)
  redis.call('LTRIM', left, -10000, -1)
  redis.call('INCR', left_count)
  redis.call('HSET', key, 'state', 'LEFT')
  redis.call('PEXPIRE', key, keep_ms)
  return {'LEFT', 'LEFT'}
end
local ticket = redis.call('HMGET', key, 'state', 'tok', 'exp')
if not ticket[1] then
  return {'NOT_FOUND', ''}
end
if ticket[1] == 'TOKEN_ISSUED' and tonumber(ticket[3]) > tonumber(now_ms) then
  redis.call('HSET', key, 'state', 'LEFT')
  redis.call('PEXPIRE', key, keep_ms)
  redis.call('ZREM', active, id)
  redis.call('DEL', prefix .. 'token:' .. string.match(ticket[2], '([^.]+)$'))
  return {'LEFT', 'LEFT'}
end
if ticket[1] == 'HELD' and tonumber(ticket[3]) > tonumber(now_ms) then
  redis.call('HSET', key, 'state', 'LEFT')
  redis.call('PEXPIRE', key, keep_ms)
  return {'LEFT', 'LEFT'}
end
if ticket[1] == 'TOKEN_ISSUED' or ticket[1] == 'HELD' then
  return {'ENDED', 'EXPIRED'}
end
return {'ENDED', ticket[1]}
