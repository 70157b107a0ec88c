-- One SSE refresh of one process, in one atomic step: what changed in the queue since the
-- caller's cursor, plus exact reads of the few tickets it needs (new streams, admitted ones).
-- KEYS[1] queue   KEYS[2] popped   KEYS[3] left (LIST of seqs)   KEYS[4] left_count
-- ARGV[1] key prefix   ARGV[2] has cursor (0|1)   ARGV[3] cursor popped   ARGV[4] cursor left
-- ARGV[5..] ticket ids to read exactly   KEYS[5] prequeue (SET: its tickets read as state
-- PRE_QUEUE with position 0 and their seq)
-- Returns {popped, left_count, reset (0|1), popped since cursor, n, seq_1 .. seq_n,
--          then 5 entries per id: position or 0, seq or '', state, token, expiry}.
-- reset = 1 when the cursor cannot be followed (first call, trimmed list, emptied store).
-- Random queueing (docs/DESIGN.md "Random queueing"): KEYS[6] settings (`qmethod`) KEYS[7]
-- lottery   KEYS[8] lottery_mac   KEYS[9] lottery_filing. In a random room a join can move anyone
-- back, so the cursor is never followed (reset = 1: every stream is read exactly), and positions
-- are ranks in the lottery (arrival order while lottery_filing exists).
local random = redis.call('HGET', KEYS[6], 'qmethod') == 'random'
local ranked = random and redis.call('EXISTS', KEYS[9]) == 0
local popped = tonumber(redis.call('GET', KEYS[2]) or '0')
local left_count = tonumber(redis.call('GET', KEYS[4]) or '0')
local reset = 1
local popped_since = 0
local leavers = {}
if ARGV[2] == '1' and not random then
  local since_popped = tonumber(ARGV[3])
  local new_leavers = left_count - tonumber(ARGV[4])
  if popped >= since_popped and new_leavers >= 0 and new_leavers <= redis.call('LLEN', KEYS[3]) then
    reset = 0
    popped_since = popped - since_popped
    if new_leavers > 0 then
      leavers = redis.call('LRANGE', KEYS[3], -new_leavers, -1)
    end
  end
end
local out = {popped, left_count, reset, popped_since, #leavers}
for _, seq in ipairs(leavers) do
  out[#out + 1] = seq
end
for i = 5, #ARGV do
  local rank = redis.call('ZRANK', KEYS[1], ARGV[i])
  if rank and redis.call('SISMEMBER', KEYS[5], ARGV[i]) == 1 then
    out[#out + 1] = 0
    out[#out + 1] = redis.call('ZSCORE', KEYS[1], ARGV[i])
    out[#out + 1] = 'PRE_QUEUE'
    out[#out + 1] = ''
    out[#out + 1] = ''
  elseif rank then
    local member = ranked and redis.call('HGET', KEYS[8], ARGV[i])
    if member then
      rank = redis.call('ZRANK', KEYS[7], member)
    end
    out[#out + 1] = rank + 1
    out[#out + 1] = redis.call('ZSCORE', KEYS[1], ARGV[i])
    out[#out + 1] = ''
    out[#out + 1] = ''
    out[#out + 1] = ''
  else
    local t = redis.call('HMGET', ARGV[1] .. 'ticket:' .. ARGV[i], 'state', 'tok', 'exp')
    out[#out + 1] = 0
    out[#out + 1] = ''
    out[#out + 1] = t[1] or ''
    out[#out + 1] = t[2] or ''
    out[#out + 1] = t[3] or ''
  end
end
return out
