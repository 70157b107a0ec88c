-- One leader tick: check the lease holder and epoch (fencing), renew the lease, expire overdue
-- tokens, then pop shoppers in arrival order and issue their entry tokens, all atomically.
-- Presence (docs/DESIGN.md "Presence"): a waiting ticket not heard from for the abandon time is
-- skipped instead of admitted (held: out of the queue like a leaver, so positions and SSE cursors
-- move; its hash says HELD with its seq, `exp` = end of the hold). Besides the head, each tick
-- looks at the last-heard times of the next SWEEP arrival seqs (a cursor going round the line),
-- so silent tickets anywhere in the line stop counting within abandon + N / (SWEEP × ticks/s).
-- KEYS[1] queue   KEYS[2] active (ZSET id -> token expiry ms)   KEYS[3] leader   KEYS[4] epoch
-- KEYS[5] settings   KEYS[6] popped (STRING: shoppers ever admitted, for SSE hubs)
-- KEYS[7] left (LIST)   KEYS[8] left_count   KEYS[9] sweep (next seq to look at)
-- KEYS[10] sweep_low (lowest `seen:` chunk not yet deleted)   KEYS[11] seq (arrival counter)
-- ARGV[1] holder   ARGV[2] epoch   ARGV[3] now ms   ARGV[4] token TTL ms   ARGV[5] keep ms
-- ARGV[6] cap on active users (-1 = none)   ARGV[7] key prefix   ARGV[8] lease ms
-- KEYS[12] bank (STRING: instant admissions left for join.lua)   KEYS[13] pace (STRING, the
-- leader's measured pace for every replica's ETAs)
-- ARGV[9] abandon ms   ARGV[10] hold ms   ARGV[11] most instant admissions to bank
-- ARGV[12] pace text ("" = leave as is)   ARGV[13..] tokens "room.secret"
-- What the quota leaves unused with nobody waiting is banked for instant joins, so every
-- admission, tick or join, spends some tick's quota exactly once.
-- Returns {admitted (-1 = fenced), expired, waiting, active, skipped, rate, paused, ttl_ms, cap,
-- checkout, share, abandon_ms, hold_ms, pow, pow_auto, req_user, version, shoppers ever admitted}: the settings are those
-- in force now, for the next tick's quota.
-- A room paused in the store admits nobody, whatever the caller's (possibly older) copy says.
-- Stock (docs/DESIGN.md "Stock and sold out"): never more tokens out than units left (settings
-- `stock`); a sold-out room (`soldout` = 1) admits and skips nobody.
-- KEYS[14] prequeue (SET): while it holds tickets not yet drawn (docs/DESIGN.md "Scheduled opening
-- and the draw"), nobody is admitted or skipped.
-- The reply ends with the settings' opens_ms and preopens_ms ("" = none), then the sale's fields
-- {stock, sold, soldout, closed, msg_en, msg_ko, name_en, name_ko, wait_en, wait_ko, qmethod} (absent = nil).
-- Random queueing (docs/DESIGN.md "Random queueing"): KEYS[15] lottery (ZSET, scores 0, member
-- `mac .. tag .. id`)   KEYS[16] lottery_mac (HASH id -> member)   KEYS[17] lottery_filing. In a
-- random room the tick takes the smallest members of the lottery instead of the queue's head
-- (each also leaves the queue); a skip, an admission and a sold-out removal take the ticket out
-- of the lottery too (a skipped one keeps its member in its hash, `lot`, for its return). While
-- lottery_filing exists (a switch to random whose waiting tickets are not all filed yet) nobody
-- is admitted, and the reply's field after `popped` is 1: the caller files them.
-- KEYS[18] gone (the room's tombstone): a deleted room is led no more, as if fenced (its keys are
-- being purged: tokens, slots or counters written behind the purge's SCAN would outlive it).
if redis.call('GET', KEYS[3]) ~= ARGV[1] or redis.call('GET', KEYS[4]) ~= ARGV[2]
    or redis.call('EXISTS', KEYS[18]) == 1 then
  return {-1, 0, 0, 0, 0, '', '', '', '', '', '', '', '', '', '', '', '', 0, 0, '', '', '', '', '', '', '', '',
          '', '', '', '', ''}
end
local random = redis.call('HGET', KEYS[5], 'qmethod') == 'random'
local filing = random and redis.call('EXISTS', KEYS[17]) == 1
-- The ticket's lottery member, taken out of the lottery (nil when it is not in it).
local function unlot(id)
  if not random then
    return nil
  end
  local member = redis.call('HGET', KEYS[16], id)
  if member then
    redis.call('ZREM', KEYS[15], member)
    redis.call('HDEL', KEYS[16], id)
  end
  return member
end
redis.call('PEXPIRE', KEYS[3], ARGV[8])
local now = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local keep = ttl + tonumber(ARGV[5])
local prefix = ARGV[7]
local now_s = math.floor(now / 1000)
local abandon_s = math.floor(tonumber(ARGV[9]) / 1000)
local hold = tonumber(ARGV[10])
local SWEEP = 2048
local SKIP_BUDGET = 1000
local SOLD_OUT_BUDGET = 1000

local overdue = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
local expired = 0
for _, id in ipairs(overdue) do
  local key = prefix .. 'ticket:' .. id
  if redis.call('HGET', key, 'state') == 'TOKEN_ISSUED' then
    redis.call('HSET', key, 'state', 'EXPIRED')
    expired = expired + 1
  end
end
if #overdue > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
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
  redis.call('ZREM', KEYS[1], id)
  local member = unlot(id)
  local chunk, slot = seen_slot(seq)
  redis.call('BITFIELD', chunk, 'SET', 'u32', slot, 0)
  redis.call('RPUSH', KEYS[7], seq)
  redis.call('LTRIM', KEYS[7], -10000, -1)
  redis.call('INCR', KEYS[8])
  local key = prefix .. 'ticket:' .. id
  redis.call('HSET', key, 'state', 'HELD', 'seq', seq, 'exp', now + hold)
  if member then
    redis.call('HSET', key, 'lot', member)
  end
  redis.call('PEXPIRE', key, hold + tonumber(ARGV[5]))
  skipped = skipped + 1
end

local active = redis.call('ZCARD', KEYS[2])
local s = redis.call('HMGET', KEYS[5], 'rate', 'paused', 'ttl_ms', 'cap', 'checkout', 'share',
                    'abandon_ms', 'hold_ms', 'pow', 'pow_auto', 'req_user', 'ver')
local granted = #ARGV - 12
local quota = granted
local undrawn = redis.call('EXISTS', KEYS[14]) == 1
if s[2] == '1' or undrawn or filing then
  quota = 0
end
local cap = tonumber(ARGV[6])
if cap >= 0 then
  quota = math.min(quota, math.max(0, cap - active))
end
local sale = redis.call('HMGET', KEYS[5], 'stock', 'sold', 'soldout', 'closed', 'msg_en', 'msg_ko',
                                      'name_en', 'name_ko', 'wait_en', 'wait_ko', 'qmethod')
local sold_out = sale[3] == '1'
local left = tonumber(sale[1] or '')
if sold_out then
  quota = 0
elseif left ~= nil then
  quota = math.min(quota, math.max(0, left - active))
end
local admitted = 0
local expires_at = now + ttl
-- The next to admit: the queue's head, or the lottery's smallest member in a random room.
local function next_up()
  if not random then
    local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    if #head == 0 then
      return nil
    end
    return head[1], tonumber(head[2])
  end
  while true do
    local first = redis.call('ZRANGE', KEYS[15], 0, 0)
    if #first == 0 then
      return nil
    end
    local id = string.sub(first[1], 77)
    local seq = redis.call('ZSCORE', KEYS[1], id)
    if seq then
      return id, tonumber(seq)
    end
    -- Not waiting any more (cannot happen when every change keeps both): drop it.
    redis.call('ZREM', KEYS[15], first[1])
    redis.call('HDEL', KEYS[16], id)
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
    redis.call('ZREM', KEYS[1], id)
    unlot(id)
    redis.call('BITFIELD', chunk, 'SET', 'u32', slot, 0)
    admitted = admitted + 1
    local token = ARGV[12 + admitted]
    local secret = string.match(token, '([^.]+)$')
    local key = prefix .. 'ticket:' .. id
    redis.call('HSET', key, 'state', 'TOKEN_ISSUED', 'tok', token, 'exp', expires_at)
    redis.call('PEXPIRE', key, keep)
    redis.call('SET', prefix .. 'token:' .. secret, id, 'PX', keep)
    redis.call('ZADD', KEYS[2], expires_at, id)
  end
end
if admitted > 0 then
  redis.call('INCRBY', KEYS[6], admitted)
end
-- A sold-out room's line is emptied from the head, SOLD_OUT_BUDGET a tick: each ticket's hash
-- says SOLD_OUT until the terminal TTL (what every status of it already showed), its last-heard
-- slot is cleared, and its seq goes to `left` like a leaver's, so SSE cursors move.
if sold_out and not undrawn then
  local gone = redis.call('ZPOPMIN', KEYS[1], SOLD_OUT_BUDGET)
  for i = 1, #gone, 2 do
    local key = prefix .. 'ticket:' .. gone[i]
    unlot(gone[i])
    redis.call('HSET', key, 'state', 'SOLD_OUT')
    redis.call('PEXPIRE', key, ARGV[5])
    local chunk, slot = seen_slot(tonumber(gone[i + 1]))
    redis.call('BITFIELD', chunk, 'SET', 'u32', slot, 0)
    redis.call('RPUSH', KEYS[7], gone[i + 1])
  end
  if #gone > 0 then
    redis.call('LTRIM', KEYS[7], -10000, -1)
    redis.call('INCRBY', KEYS[8], #gone / 2)
  end
end

-- The sweep: SWEEP arrival seqs from the cursor (wrapping to the head), silent ones skipped.
local last = tonumber(redis.call('GET', KEYS[11]) or '0')
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local head_chunk = math.floor((last + 1) / 65536)
if #head > 0 and (sold_out or undrawn) then
  head_chunk = math.floor(tonumber(head[2]) / 65536)
elseif #head > 0 then
  local first = tonumber(head[2])
  head_chunk = math.floor(first / 65536)
  local from = tonumber(redis.call('GET', KEYS[9]) or '0')
  if from < first or from > last then
    from = first
  end
  local to = math.min(last, from + SWEEP - 1)
  local seq = from
  while seq <= to and skipped < SKIP_BUDGET do
    local chunk_end = math.min(to, math.floor(seq / 65536) * 65536 + 65535)
    local bytes = redis.call('GETRANGE', prefix .. 'seen:' .. math.floor(seq / 65536),
                             (seq % 65536) * 4, (chunk_end % 65536) * 4 + 3)
    for j = 0, chunk_end - seq do
      local b1, b2, b3, b4 = string.byte(bytes, j * 4 + 1, j * 4 + 4)
      if b4 and silent_since(((b1 * 256 + b2) * 256 + b3) * 256 + b4)
          and skipped < SKIP_BUDGET then
        local ids = redis.call('ZRANGEBYSCORE', KEYS[1], seq + j, seq + j, 'LIMIT', 0, 1)
        if #ids > 0 then
          skip(ids[1], seq + j)
        end
      end
    end
    seq = chunk_end + 1
  end
  redis.call('SET', KEYS[9], seq)
end
-- Chunks wholly behind the head (`seen:` and `born:`) hold nobody's time any more.
local low = tonumber(redis.call('GET', KEYS[10]) or tostring(head_chunk))
if head_chunk < low then
  low = head_chunk
end
while low < head_chunk do
  redis.call('DEL', prefix .. 'seen:' .. low)
  redis.call('DEL', prefix .. 'born:' .. low)
  low = low + 1
end
redis.call('SET', KEYS[10], low)

local waiting = redis.call('ZCARD', KEYS[1])
local bank = 0
if waiting == 0 and s[2] ~= '1' then
  bank = math.min(tonumber(ARGV[11]),
                  tonumber(redis.call('GET', KEYS[12]) or '0') + granted - admitted)
end
redis.call('SET', KEYS[12], bank, 'PX', ARGV[8])
if ARGV[12] ~= '' then
  redis.call('SET', KEYS[13], ARGV[12], 'PX', 10000)
end
local reply = {admitted, expired, waiting, active + admitted, skipped,
               s[1] or '', s[2] or '', s[3] or '', s[4] or '', s[5] or '', s[6] or '', s[7] or '',
               s[8] or '', s[9] or '', s[10] or '', s[11] or '', s[12] or '0',
               tonumber(redis.call('GET', KEYS[6]) or '0'),
               filing and 1 or 0,
               redis.call('HGET', KEYS[5], 'opens_ms') or '',
               redis.call('HGET', KEYS[5], 'preopens_ms') or ''}
for _, v in ipairs(sale) do
  table.insert(reply, v)
end
return reply
