-- The holders of some tickets were heard from (a poll, an open SSE stream, a heartbeat): one step.
-- KEYS: room queue left left_count prequeue lottery lottery_mac lottery_filing popped sweep_low
-- ARGV: generation prefix now_ms mode
-- EACH: id
-- A waiting ticket's last-heard slot (`seen:<seq / 65536>`, u32 Unix seconds at seq % 65536) is
-- set. A skipped ticket within its hold (hash state HELD, `seq`, `exp` = end of the hold) goes
-- back to its arrival seq in the queue (at the head if the line has passed it), `kept` = 1, and a
-- return (-seq) is counted in `left` for SSE hubs, whose streams behind it move back by one.
-- prequeue: its tickets answer state PRE_QUEUE, position 0.
-- mode: 0 = positions not wanted, 1 = wanted, 2 = one polled id with its anchor, 3 = heard
-- only, nothing read back (the reply is empty; the items are `seen:` slots, see below).
-- Returns 5 entries per id: position (0 = not waiting, -1 = waiting but not asked), kept ('1' or
-- '', also without positions: a return tells the caller's SSE hub), state, token, expiry ('' for
-- a waiting ticket). With mode 2, then the anchor of the (one) id, read in this same step:
-- popped, left_count and its seq while it waits in a line the SSE hub can follow (not random,
-- not the pre-queue), else three ''.
-- Random queueing (docs/DESIGN.md "Random queueing"): in a random room a position is the rank in
-- the lottery (arrival order while lottery_filing exists), and a returning ticket goes back into
-- the lottery under the member its hash kept (`lot`, written by admit.lua's skip); one skipped
-- without it (before the switch) is left to the filing, which lottery_filing asks the next tick
-- for.
local refused = refusal(room, generation)
if refused then
  return refused
end
-- Whether a `redis.pcall` reply is an error (e.g. OOM under `noeviction`).
local function writes_refused(reply)
  return type(reply) == 'table' and reply.err ~= nil
end
local now = tonumber(now_ms)
local out = {}
local anchor_seq = nil
local quiet = mode == '3'
-- Appends its arguments (none nil) to the reply.
local function push(...)
  for _, value in ipairs({...}) do
    out[#out + 1] = value
  end
end
-- Mode 2's anchor when there is none: three ''.
local function no_anchor()
  push('', '', '')
end
-- Heard only (mode 3): the batch of polls the caller answered from memory (docs/DESIGN.md "Polls
-- answered from memory"), given as `seen:` slots, not ids: ARGV[EACH..] is, per chunk, the chunk
-- number, a count n, then n slots `#<seq % 65536>`. Each chunk's slots are written by one
-- BITFIELD, not two commands per id (a redis.call costs Redis more than the slot it writes), and
-- nothing is read back. The tickets were waiting when answered, heard within half the abandon
-- time, so the skip rule cannot have passed them since; one that has left or been admitted since
-- gets a slot nobody reads (admit.lua's sweep finds no ticket at its seq). Nothing is written
-- when nobody waits (the room's line is empty) nor below sweep_low, the lowest chunk
-- admit.lua has not deleted: a slot there would make the chunk again, for ever.
if quiet then
  if redis.call('EXISTS', queue) == 0 then
    return out
  end
  local low = tonumber(redis.call('GET', sweep_low) or '0')
  local secs = string.format('%d', math.floor(now / 1000))
  local i = EACH
  while i <= #ARGV do
    local chunk = ARGV[i]
    local n = tonumber(ARGV[i + 1])
    if tonumber(chunk) >= low then
      local ops = {}
      for j = i + 2, i + 1 + n do
        ops[#ops + 1] = 'SET'
        ops[#ops + 1] = 'u32'
        ops[#ops + 1] = ARGV[j]
        ops[#ops + 1] = secs
      end
      -- Best effort, as below: a full Redis answers the polls without recording them.
      redis.pcall('BITFIELD', prefix .. 'seen:' .. chunk, unpack(ops))
    end
    i = i + 2 + n
  end
  return out
end
local random = redis.call('HGET', room, 'qmethod') == 'random'
local ranked = random and redis.call('EXISTS', lottery_filing) == 0
for i = EACH, #ARGV do
  local id = ARGV[i]
  local key = prefix .. 'ticket:' .. id
  local seq = redis.call('ZSCORE', queue, id)
  if not seq then
    local held = redis.call('HMGET', key, 'state', 'seq', 'exp')
    -- pcall: a Redis full under `noeviction` refuses the first write of a script (OOM); the ticket
    -- then stays held and the poll is still answered (docs/operating.md, "Redis settings Vestibule
    -- needs").
    if held[1] == 'HELD' and tonumber(held[3]) > now
        and not writes_refused(redis.pcall('ZADD', queue, held[2], id)) then
      seq = held[2]
      redis.call('RPUSH', left, '-' .. seq)
      redis.call('LTRIM', left, -10000, -1)
      redis.call('INCR', left_count)
      redis.call('HSET', key, 'state', 'WAITING', 'kept', '1')
      if random then
        local member = redis.call('HGET', key, 'lot')
        if member then
          redis.call('ZADD', lottery, 0, member)
          redis.call('HSET', lottery_mac, id, member)
        else
          redis.call('SET', lottery_filing, '1')
          ranked = false
        end
      end
    end
  end
  if seq then
    local n = tonumber(seq)
    -- Best effort for the same reason: a full Redis answers the poll without recording it.
    redis.pcall('BITFIELD', prefix .. 'seen:' .. math.floor(n / 65536), 'SET', 'u32',
                '#' .. (n % 65536), math.floor(now / 1000))
    local state = 'WAITING'
    if redis.call('SISMEMBER', prequeue, id) == 1 then
      state = 'PRE_QUEUE'
      out[#out + 1] = 0
      out[#out + 1] = ''
    elseif mode ~= '0' then
      anchor_seq = seq
      local member = ranked and redis.call('HGET', lottery_mac, id)
      if member then
        out[#out + 1] = redis.call('ZRANK', lottery, member) + 1
      else
        out[#out + 1] = redis.call('ZRANK', queue, id) + 1
      end
      out[#out + 1] = redis.call('HGET', key, 'kept') or ''
    else
      out[#out + 1] = -1
      out[#out + 1] = redis.call('HGET', key, 'kept') or ''
    end
    out[#out + 1] = state
    out[#out + 1] = ''
    out[#out + 1] = ''
  else
    local t = redis.call('HMGET', key, 'state', 'tok', 'exp')
    out[#out + 1] = 0
    out[#out + 1] = ''
    out[#out + 1] = t[1] or ''
    out[#out + 1] = t[2] or ''
    out[#out + 1] = t[3] or ''
  end
end
if mode == '2' then
  if anchor_seq and not random then
    out[#out + 1] = redis.call('GET', popped) or '0'
    out[#out + 1] = redis.call('GET', left_count) or '0'
    out[#out + 1] = anchor_seq
  else
    no_anchor()
  end
end
return out
