-- One leader tick: check the lease holder and epoch (fencing), renew the lease, expire overdue
-- tokens, then pop shoppers in arrival order and issue their entry tokens, all atomically.
-- Presence (docs/DESIGN.md "Presence"): a waiting ticket not heard from for the abandon time is
-- skipped instead of admitted (held: out of the queue like a leaver, so positions and SSE cursors
-- move; its hash says HELD with its seq, `exp` = end of the hold). Besides the head, each tick
-- looks at the last-heard times of the next SWEEP arrival seqs (a cursor going round the line),
-- so silent tickets anywhere in the line stop counting within abandon + N / (SWEEP × ticks/s).
-- KEYS: room queue active leader epoch popped left left_count sweep sweep_low seq bank pace prequeue lottery lottery_mac lottery_filing
-- ARGV: generation holder fence now_ms ttl_ms keep_ms cap prefix lease_ms abandon_ms hold_ms bank_max pace_text
-- EACH: token
-- queue: ZSET id -> seq; active: ZSET id -> token expiry ms; leader, epoch: the lease and its
-- fencing counter (holder, fence: the caller's); popped: shoppers ever admitted (for SSE hubs);
-- left, left_count: as leave.lua's; sweep: the next seq to look at; sweep_low: the lowest `seen:`
-- chunk not yet deleted; seq: the arrival counter; bank: instant admissions left for join.lua;
-- pace: the leader's measured pace for every replica's ETAs (pace_text, "" = leave as is).
-- cap: most active users (-1 = none); keep_ms: how long finished tickets stay readable;
-- bank_max: most instant admissions to bank; each item a fresh entry token "room.secret".
-- What the quota leaves unused with nobody waiting is banked for instant joins, so every
-- admission, tick or join, spends some tick's quota exactly once.
-- A room paused in the store admits nobody, whatever the caller's (possibly older) copy says.
-- Stock (docs/DESIGN.md "Stock and sold out"): never more tokens out than units left (the
-- document's `stock`); a sold-out room (`soldout`) admits and skips nobody.
-- prequeue: while it holds tickets not yet drawn (docs/DESIGN.md "Scheduled opening and the
-- draw"), nobody is admitted or skipped.
-- Random queueing (docs/DESIGN.md "Random queueing"): lottery (ZSET, scores 0, member `mac .. tag
-- .. id`), lottery_mac (HASH id -> member), lottery_filing. In a random room the tick takes the
-- smallest members of the lottery instead of the queue's head (each also leaves the queue); a
-- skip, an admission and a sold-out removal take the ticket out of the lottery too (a skipped one
-- keeps its member in its hash, `lot`, for its return). While lottery_filing exists (a switch to
-- random whose waiting tickets are not all filed yet) nobody is admitted, and the reply's
-- `filing` is 1: the caller files them.
-- Returns {'fenced'} (the epoch is stale or the lease lost: nothing done) or {'ok', admitted,
-- expired, waiting, active, skipped, shoppers ever admitted, filing (1|0), document (as HGETALL
-- answers it, for the next tick)}.
local refused = refusal(room, generation)
if refused then
  return refused
end
if redis.call('GET', leader) ~= holder or redis.call('GET', epoch) ~= fence then
  return {'fenced'}
end
local random = redis.call('HGET', room, 'qmethod') == 'random'
local filing = random and redis.call('EXISTS', lottery_filing) == 1
-- The ticket's lottery member, taken out of the lottery (nil when it is not in it).
local function unlot(id)
  if not random then
    return nil
  end
  local member = redis.call('HGET', lottery_mac, id)
  if member then
    redis.call('ZREM', lottery, member)
    redis.call('HDEL', lottery_mac, id)
  end
  return member
end
redis.call('PEXPIRE', leader, lease_ms)
local now = tonumber(now_ms)
local ttl = tonumber(ttl_ms)
local keep = ttl + tonumber(keep_ms)
local now_s = math.floor(now / 1000)
local abandon_s = math.floor(tonumber(abandon_ms) / 1000)
local hold = tonumber(hold_ms)
local SWEEP = 2048
local SKIP_BUDGET = 1000
local SOLD_OUT_BUDGET = 1000

local overdue = redis.call('ZRANGEBYSCORE', active, '-inf', now)
local expired = 0
for _, id in ipairs(overdue) do
  local key = prefix .. 'ticket:' .. id
  if redis.call('HGET', key, 'state') == 'TOKEN_ISSUED' then
    redis.call('HSET', key, 'state', 'EXPIRED')
    expired = expired + 1
  end
end
if #overdue > 0 then
  redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
end

-- Last heard (whole seconds; never skipped before the abandon time has fully passed).
local function seen_slot(seq)
  return prefix .. 'seen:' .. math.floor(seq / 65536), '#' .. (seq % 65536)
end
local function silent_since(heard)
  return heard > 0 and now_s - heard > abandon_s
end
local skipped = 0
local function skip(id, seq)
  redis.call('ZREM', queue, id)
  local member = unlot(id)
  local chunk, slot = seen_slot(seq)
  redis.call('BITFIELD', chunk, 'SET', 'u32', slot, 0)
  redis.call('RPUSH', left, seq)
  redis.call('LTRIM', left, -10000, -1)
  redis.call('INCR', left_count)
  local key = prefix .. 'ticket:' .. id
  redis.call('HSET', key, 'state', 'HELD', 'seq', seq, 'exp', now + hold)
  if member then
    redis.call('HSET', key, 'lot', member)
  end
  redis.call('PEXPIRE', key, hold + tonumber(keep_ms))
  skipped = skipped + 1
end

local tokens_out = redis.call('ZCARD', active)
local paused = redis.call('HGET', room, 'paused') == '1'
local granted = ITEMS
local quota = granted
local undrawn = redis.call('EXISTS', prequeue) == 1
if paused or undrawn or filing then
  quota = 0
end
local most_out = tonumber(cap)
if most_out >= 0 then
  quota = math.min(quota, math.max(0, most_out - tokens_out))
end
local sale = redis.call('HMGET', room, 'stock', 'soldout')
local sold_out = sale[2] == '1'
local units_left = tonumber(sale[1] or '')
if sold_out then
  quota = 0
elseif units_left ~= nil then
  quota = math.min(quota, math.max(0, units_left - tokens_out))
end
local admitted = 0
local expires_at = now + ttl
-- The next to admit: the queue's head, or the lottery's smallest member in a random room.
local function next_up()
  if not random then
    local head = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
    if #head == 0 then
      return nil
    end
    return head[1], tonumber(head[2])
  end
  while true do
    local first = redis.call('ZRANGE', lottery, 0, 0)
    if #first == 0 then
      return nil
    end
    local id = string.sub(first[1], 77)
    local seq = redis.call('ZSCORE', queue, id)
    if seq then
      return id, tonumber(seq)
    end
    -- Not waiting any more (cannot happen when every change keeps both): drop it.
    redis.call('ZREM', lottery, first[1])
    redis.call('HDEL', lottery_mac, id)
  end
end
while admitted < quota do
  local id, seq = next_up()
  if not id then
    break
  end
  local chunk, slot = seen_slot(seq)
  if not sold_out and silent_since(redis.call('BITFIELD', chunk, 'GET', 'u32', slot)[1]) then
    if skipped >= SKIP_BUDGET then
      break
    end
    skip(id, seq)
  else
    redis.call('ZREM', queue, id)
    unlot(id)
    redis.call('BITFIELD', chunk, 'SET', 'u32', slot, 0)
    admitted = admitted + 1
    local token = ARGV[EACH + admitted - 1]
    local secret = string.match(token, '([^.]+)$')
    local key = prefix .. 'ticket:' .. id
    redis.call('HSET', key, 'state', 'TOKEN_ISSUED', 'tok', token, 'exp', expires_at)
    redis.call('PEXPIRE', key, keep)
    redis.call('SET', prefix .. 'token:' .. secret, id, 'PX', keep)
    redis.call('ZADD', active, expires_at, id)
  end
end
if admitted > 0 then
  redis.call('INCRBY', popped, admitted)
end
-- A sold-out room's line is emptied from the head, SOLD_OUT_BUDGET a tick: each ticket's hash
-- says SOLD_OUT until the terminal TTL (what every status of it already showed), its last-heard
-- slot is cleared, and its seq goes to `left` like a leaver's, so SSE cursors move.
if sold_out and not undrawn then
  local gone = redis.call('ZPOPMIN', queue, SOLD_OUT_BUDGET)
  for i = 1, #gone, 2 do
    local key = prefix .. 'ticket:' .. gone[i]
    unlot(gone[i])
    redis.call('HSET', key, 'state', 'SOLD_OUT')
    redis.call('PEXPIRE', key, keep_ms)
    local chunk, slot = seen_slot(tonumber(gone[i + 1]))
    redis.call('BITFIELD', chunk, 'SET', 'u32', slot, 0)
    redis.call('RPUSH', left, gone[i + 1])
  end
  if #gone > 0 then
    redis.call('LTRIM', left, -10000, -1)
    redis.call('INCRBY', left_count, #gone / 2)
  end
end

-- The sweep: SWEEP arrival seqs from the cursor (wrapping to the head), silent ones skipped.
local last = tonumber(redis.call('GET', seq) or '0')
local head = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
local head_chunk = math.floor((last + 1) / 65536)
if #head > 0 and (sold_out or undrawn) then
  head_chunk = math.floor(tonumber(head[2]) / 65536)
elseif #head > 0 then
  local first = tonumber(head[2])
  head_chunk = math.floor(first / 65536)
  local from = tonumber(redis.call('GET', sweep) or '0')
  if from < first or from > last then
    from = first
  end
  local to = math.min(last, from + SWEEP - 1)
  local at = from
  while at <= to and skipped < SKIP_BUDGET do
    local chunk_end = math.min(to, math.floor(at / 65536) * 65536 + 65535)
    local bytes = redis.call('GETRANGE', prefix .. 'seen:' .. math.floor(at / 65536),
                             (at % 65536) * 4, (chunk_end % 65536) * 4 + 3)
    for j = 0, chunk_end - at do
      local b1, b2, b3, b4 = string.byte(bytes, j * 4 + 1, j * 4 + 4)
      if b4 and silent_since(((b1 * 256 + b2) * 256 + b3) * 256 + b4)
          and skipped < SKIP_BUDGET then
        local ids = redis.call('ZRANGEBYSCORE', queue, at + j, at + j, 'LIMIT', 0, 1)
        if #ids > 0 then
          skip(ids[1], at + j)
        end
      end
    end
    at = chunk_end + 1
  end
  redis.call('SET', sweep, at)
end
-- Chunks wholly behind the head (`seen:` and `born:`) hold nobody's time any more.
local low = tonumber(redis.call('GET', sweep_low) or tostring(head_chunk))
if head_chunk < low then
  low = head_chunk
end
while low < head_chunk do
  redis.call('DEL', prefix .. 'seen:' .. low)
  redis.call('DEL', prefix .. 'born:' .. low)
  low = low + 1
end
redis.call('SET', sweep_low, low)

local waiting = redis.call('ZCARD', queue)
local banked = 0
if waiting == 0 and not paused then
  banked = math.min(tonumber(bank_max),
                    tonumber(redis.call('GET', bank) or '0') + granted - admitted)
end
redis.call('SET', bank, banked, 'PX', lease_ms)
if pace_text ~= '' then
  redis.call('SET', pace, pace_text, 'PX', 10000)
end
return {'ok', admitted, expired, waiting, tokens_out + admitted, skipped,
        tonumber(redis.call('GET', popped) or '0'), filing and 1 or 0, redis.call('HGETALL', room)}
