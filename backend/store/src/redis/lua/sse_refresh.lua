-- One SSE refresh of one process, in one atomic step: what changed in the queue since the
-- caller's cursor, plus exact reads of the few tickets it needs (new streams, admitted ones).
-- KEYS: room queue popped left left_count prequeue lottery lottery_mac lottery_filing
-- ARGV: generation prefix has_cursor since_popped since_left
-- EACH: id
-- has_cursor: 1 = the caller's cursor (since_popped, since_left) can be followed from. prequeue:
-- its tickets read as state PRE_QUEUE with position 0 and their seq.
-- Returns {popped, left_count, reset (0|1), popped since cursor, n, seq_1 .. seq_n,
--          then 5 entries per id: position or 0, seq or '', state, token, expiry}.
-- reset = 1 when the cursor cannot be followed (first call, trimmed list, emptied store).
-- Random queueing (docs/DESIGN.md "Random queueing"): in a random room a join can move anyone
-- back, so the cursor is never followed (reset = 1: every stream is read exactly), and positions
-- are ranks in the lottery (arrival order while lottery_filing exists).
local refused = refusal(room, generation)
if refused then
  return refused
end
local random = redis.call('HGET', room, 'qmethod') == 'random'
local ranked = random and redis.call('EXISTS', lottery_filing) == 0
local popped_now = tonumber(redis.call('GET', popped) or '0')
local left_now = tonumber(redis.call('GET', left_count) or '0')
local reset = 1
local popped_since = 0
local leavers = {}
if has_cursor == '1' and not random then
  local from_popped = tonumber(since_popped)
  local new_leavers = left_now - tonumber(since_left)
  if popped_now >= from_popped and new_leavers >= 0 and new_leavers <= redis.call('LLEN', left) then
    reset = 0
    popped_since = popped_now - from_popped
    if new_leavers > 0 then
      leavers = redis.call('LRANGE', left, -new_leavers, -1)
    end
  end
end
local out = {popped_now, left_now, reset, popped_since, #leavers}
for _, seq in ipairs(leavers) do
  out[#out + 1] = seq
end
for i = EACH, #ARGV do
  local id = ARGV[i]
  local rank = redis.call('ZRANK', queue, id)
  if rank and redis.call('SISMEMBER', prequeue, id) == 1 then
    out[#out + 1] = 0
    out[#out + 1] = redis.call('ZSCORE', queue, id)
    out[#out + 1] = 'PRE_QUEUE'
    out[#out + 1] = ''
    out[#out + 1] = ''
  elseif rank then
    local member = ranked and redis.call('HGET', lottery_mac, id)
    if member then
      rank = redis.call('ZRANK', lottery, member)
    end
    out[#out + 1] = rank + 1
    out[#out + 1] = redis.call('ZSCORE', queue, id)
    out[#out + 1] = ''
    out[#out + 1] = ''
    out[#out + 1] = ''
  else
    local t = redis.call('HMGET', prefix .. 'ticket:' .. id, 'state', 'tok', 'exp')
    out[#out + 1] = 0
    out[#out + 1] = ''
    out[#out + 1] = t[1] or ''
    out[#out + 1] = t[2] or ''
    out[#out + 1] = t[3] or ''
  end
end
return out
