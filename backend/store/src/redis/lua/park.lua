-- Park the tickets of joins whose answer never reached their shopper (docs/DESIGN.md "Joins nobody
-- heard the answer of"): the join's call timed out or its connection broke (504 `store_timeout`),
-- so nobody may know the ticket's id. Sent after the join on the same connection, so it runs
-- after the join if the join ran at all.
-- KEYS: room queue left left_count prequeue lottery lottery_mac
-- ARGV: generation prefix now_ms joined_ms hold_ms keep_ms
-- EACH: id
-- Each id still waiting in the line (not the pre-queue), born in the second of joined_ms (its
-- `born:` slot) and not heard from since (its `seen:` slot no later than that) is skipped now as
-- admit.lua skips a silent ticket: out of the queue (and the lottery, its member kept in its hash
-- as `lot`), its `seen:` slot 0, counted in `left` like a leaver (SSE cursors move), its hash
-- HELD with its seq, `exp` = now + hold_ms. hear.lua brings it back to its place when its shopper
-- is heard from within the hold (a poll of its id; a keyed retry of its join, whose answer hears
-- it). Any other id is left as it is: one admitted at once keeps its token. Idempotent.
-- Returns the ids parked.
local refused = refusal(room, generation)
if refused then
  return refused
end
local random = redis.call('HGET', room, 'qmethod') == 'random'
local now = tonumber(now_ms)
local joined_s = math.floor(tonumber(joined_ms) / 1000)
local hold = tonumber(hold_ms)
local parked = {}
for i = EACH, #ARGV do
  local id = ARGV[i]
  local score = redis.call('ZSCORE', queue, id)
  if score and redis.call('SISMEMBER', prequeue, id) == 0 then
    local seq = tonumber(score)
    local chunk = string.format('%d', math.floor(seq / 65536))
    local slot = '#' .. string.format('%d', seq % 65536)
    local born = redis.call('BITFIELD_RO', prefix .. 'born:' .. chunk, 'GET', 'u32', slot)[1]
    local seen = redis.call('BITFIELD_RO', prefix .. 'seen:' .. chunk, 'GET', 'u32', slot)[1]
    if born == joined_s and seen <= born then
      local seq_s = string.format('%d', seq)
      redis.call('ZREM', queue, id)
      local member = nil
      if random then
        member = redis.call('HGET', lottery_mac, id)
        if member then
          redis.call('ZREM', lottery, member)
          redis.call('HDEL', lottery_mac, id)
        end
      end
      redis.call('BITFIELD', prefix .. 'seen:' .. chunk, 'SET', 'u32', slot, 0)
      redis.call('RPUSH', left, seq_s)
      redis.call('LTRIM', left, -10000, -1)
      redis.call('INCR', left_count)
      local key = prefix .. 'ticket:' .. id
      redis.call('HSET', key, 'state', 'HELD', 'seq', seq_s, 'exp', string.format('%d', now + hold))
      if member then
        redis.call('HSET', key, 'lot', member)
      end
      redis.call('PEXPIRE', key, string.format('%d', hold + tonumber(keep_ms)))
      parked[#parked + 1] = id
    end
  end
end
return parked
