-- Join a room's queue, idempotently: one or more joins of one room in one call (a group commit:
-- the joins a serving thread has waiting when its last call returned, `store/redis/group_commit.rs`),
-- each run in turn exactly as if it had come alone; the reply has one line per join, in order.
-- KEYS: room queue seq dedup active bank popped prequeue draw prequeue_order prequeue_mac prequeue_seqs lottery lottery_mac lottery_filing
-- ARGV: generation prefix dedup_ttl now_ms
-- EACH: id key derived client period_ms burst token ttl_ms keep_ms prequeue version order derived_order
-- queue: ZSET id -> arrival seq; seq: the arrival counter; dedup: HASH key -> id (re-joins of a
-- key after its ticket LEFT or EXPIRED); prefix: the generation's key prefix; dedup_ttl: seconds.
-- Each join: id, a fresh random ticket id; key, its Idempotency-Key ("" = none); derived, the
-- key's derived id (HMAC of the key with the room secret, computed by the caller; "" without a
-- key); client, period_ms, burst: the join limit ("" = no limit).
-- Instant admission (docs/DESIGN.md "No wait when there is no line"): active (ZSET), bank (the
-- instant admissions the scheduler's unused quota left, written by admit.lua), popped; token, a
-- fresh entry token ("" = never admit at once), ttl_ms, keep_ms.
-- Scheduled opening (docs/DESIGN.md "Scheduled opening and the draw"): prequeue (SET of ticket
-- ids not drawn yet), draw (HASH: seed, drawn_ms, count); prequeue = "1": a join in the
-- pre-queue window: the new ticket takes its arrival seq as usual and is also added to the
-- pre-queue (unless the draw has started: then it is an ordinary join); never admitted at once.
-- The drawn order is kept from the join on (draw.lua): prequeue_order (ZSET, scores 0, member
-- `mac .. tag .. id`), prequeue_mac (HASH id -> that member), order / derived_order: `mac .. tag`
-- of the fresh / derived id (mac: 64 hex digits of HMAC-SHA256(seed, tag), tag: 12 hex digits;
-- computed by the caller, who knows the seed); prequeue_seqs (LIST: the seqs of pre-queue joins in
-- arrival order, handed out again by draw.lua).
-- version: the settings version (the document's `ver`) the caller decided the join on ("" =
-- any): when another version is in force (an operator changed the settings through another
-- replica since) nothing changes and the answer is `stale`; the caller reads them again.
-- Random queueing (docs/DESIGN.md "Random queueing"): in a room whose document says `qmethod`
-- random, the new ticket also goes into lottery (ZSET, scores 0, member `mac .. tag .. id`, the
-- order keys as for the pre-queue) and lottery_mac (HASH id -> member), and positions are ranks
-- in the lottery, unless lottery_filing exists (the waiting tickets of a switch are still being
-- filed: arrival order until then). A join in a random room without its order keys answers
-- `needs_lottery` and changes nothing: the caller computes them (it needs the seed) and joins again.
-- The reply is one string: a line per join, in order, joined by "\n" (one bulk string costs Redis
-- and the server's reply parser far less than an array per join). Each line is one of
--   waiting <id> <created 0|1> <position>    the new or found ticket waits at that place
--   prequeue <id> <created 0|1>              it is in the pre-queue
--   ended <id>                               the key's ticket is no longer waiting: read it
--   admitted <id> <token expiry ms>          the new ticket was admitted at once
--   limited <ms to wait>                     over the client's join limit, nothing changed
--   sold_out | closed                        the room makes no new tickets, nothing changed
--   stale | needs_lottery                    see above, nothing changed
-- A new ticket counts as heard from now (`seen:<seq / 65536>`: u32 Unix seconds per arrival seq);
-- its join time goes to `born:<seq / 65536>` the same way.
-- A skipped ticket within its hold (HELD, `exp` = end of the hold) is live: `ended`.
--
-- A key's first ticket takes the key's derived id, so a retry finds it again by recomputing the id
-- and the key costs no dedup entry. Only a re-join after that ticket LEFT or EXPIRED needs another
-- id: it gets the fresh random one, remembered in the dedup hash.
local refused = refusal(room, generation)
if refused then
  return refused
end
local batch = {}
-- The settings a join reads, in one call for the batch (nothing else runs meanwhile): version,
-- queueing method, sold out, closed. A join admitted at once does not change them.
local sale = redis.call('HMGET', room, 'ver', 'qmethod', 'soldout', 'closed')
-- Whether the dedup hash exists, once for the batch: it holds only re-joins after LEFT or
-- EXPIRED, so in a rush it is usually absent and a key's look-up there is skipped. A join of the
-- batch that writes it sets this.
local dedup_exists = redis.call('EXISTS', dedup) == 1
-- How many wait, read once for the batch (ZCARD) when a join first needs it, then kept by the
-- batch's own changes to the queue (a ticket added, one admitted at once): nothing else runs
-- between the joins of a call.
local queued = nil
local function queue_size()
  if queued == nil then
    queued = redis.call('ZCARD', queue)
  end
  return queued
end
local function queue_changed(by)
  if queued ~= nil then
    queued = queued + by
  end
end

-- Now in Unix seconds (now_ms is in ms), as the u32 big-endian bytes a `seen:` / `born:` slot holds.
local now_secs = math.floor(tonumber(now_ms) / 1000)
local now_bytes = string.char(math.floor(now_secs / 16777216) % 256,
                              math.floor(now_secs / 65536) % 256, math.floor(now_secs / 256) % 256,
                              now_secs % 256)
-- The arrival seqs this call hands out are consecutive (nothing else runs meanwhile): the counter
-- is read once (GET) when a join first takes one and moved once at the end (INCRBY), and the new
-- tickets' `seen:` / `born:` slots (u32 big-endian at byte (seq mod 65536) * 4 of
-- `seen:<seq / 65536>`, as BITFIELD writes them) are written at the end as one SETRANGE per run in
-- a chunk, not one BITFIELD per ticket: a redis.call costs more than the command it runs.
local seq_first, seq_last = nil, nil
-- The `seen:` bytes of each seq handed out, at index seq - seq_first + 1.
local seen_bytes = {}
local function take_seq()
  if seq_last == nil then
    seq_last = tonumber(redis.call('GET', seq) or '0')
    seq_first = seq_last + 1
  end
  seq_last = seq_last + 1
  seen_bytes[seq_last - seq_first + 1] = now_bytes
  return seq_last
end
local function write_seqs()
  if seq_last == nil then
    return
  end
  redis.call('INCRBY', seq, string.format('%d', seq_last - seq_first + 1))
  local from = seq_first
  while from <= seq_last do
    local chunk = math.floor(from / 65536)
    local to = math.min(seq_last, chunk * 65536 + 65535)
    local offset = string.format('%d', (from % 65536) * 4)
    local chunk_s = string.format('%d', chunk)
    redis.call('SETRANGE', prefix .. 'seen:' .. chunk_s, offset,
               table.concat(seen_bytes, '', from - seq_first + 1, to - seq_first + 1))
    -- When it joined (the admin API's waiters list), laid out as `seen:`.
    redis.call('SETRANGE', prefix .. 'born:' .. chunk_s, offset, string.rep(now_bytes, to - from + 1))
    from = to + 1
  end
end

-- A waiting ticket's position: its rank in the lottery when the room's positions are `ranked`
-- there, else in arrival order.
local function position(id, ranked)
  if ranked then
    local member = redis.call('HGET', lottery_mac, id)
    if member then
      return redis.call('ZRANK', lottery, member) + 1
    end
  end
  return redis.call('ZRANK', queue, id) + 1
end

-- One join (J: its item); answers its line of the reply (see the header).
local function join(J)
  if J.version ~= '' and (sale[1] or '0') ~= J.version then
    return 'stale'
  end
  local random = sale[2] == 'random'
  if random and J.order == '' then
    return 'needs_lottery'
  end
  local ranked = random and redis.call('EXISTS', lottery_filing) == 0
  local key = J.key
  local id = J.id
  local remember = false
  local order = J.order
  if key ~= '' then
    local mapped = dedup_exists and redis.call('HGET', dedup, key) or nil
    local candidate = mapped or J.derived
    local rank = redis.call('ZRANK', queue, candidate)
    if rank then
      if redis.call('SISMEMBER', prequeue, candidate) == 1 then
        return 'prequeue ' .. candidate .. ' 0'
      end
      return 'waiting ' .. candidate .. string.format(' 0 %d', position(candidate, ranked))
    end
    local ticket = redis.call('HMGET', prefix .. 'ticket:' .. candidate, 'state', 'exp')
    local state = ticket[1]
    -- A ticket that left, or whose token expired unused, is no reason to refuse a fresh place.
    local live_until = tonumber(ticket[2] or '0')
    -- SOLD_OUT: taken out of a sold-out room's line by admit.lua; its key still finds it.
    if state == 'COMPLETED' or state == 'SOLD_OUT'
        or ((state == 'TOKEN_ISSUED' or state == 'HELD') and live_until > tonumber(now_ms)) then
      return 'ended ' .. candidate
    end
    if not mapped and not state then
      -- The key's first join (or its ticket has been forgotten): the derived id, no dedup entry.
      id = J.derived
      order = J.derived_order
    else
      remember = true
    end
  end
  -- A sold-out or closed room makes no new tickets (a join that found its ticket was answered above).
  if sale[3] == '1' then
    return 'sold_out'
  end
  if sale[4] == '1' then
    return 'closed'
  end
  -- The client's join limit (GCRA, the arithmetic of store::gcra), checked only now: a join that
  -- found its ticket above never counts, and a refused one changes nothing.
  if J.client ~= '' then
    local now = tonumber(now_ms)
    local period = tonumber(J.period_ms)
    local limit_key = prefix .. 'limit:' .. J.client
    local tat = math.max(tonumber(redis.call('GET', limit_key) or '0'), now)
    local allowed_at = tat + period - tonumber(J.burst) * period
    if now < allowed_at then
      return string.format('limited %d', allowed_at - now)
    end
    redis.call('SET', limit_key, string.format('%d', tat + period), 'PX',
               string.format('%d', tat + period - now))
  end
  -- Heard from now and born now: its slots are written with the call's others (write_seqs).
  local arrival = take_seq()
  -- The seq as a string made with integer formatting (a number handed to redis.call or joined to
  -- a string is formatted as a float).
  local arrival_s = string.format('%d', arrival)
  -- NX: a join never moves an existing member (belt and braces: a random id is fresh, a derived one
  -- was checked absent above).
  queue_changed(redis.call('ZADD', queue, 'NX', arrival_s, id))
  if J.prequeue == '1' and redis.call('HEXISTS', draw, 'started_ms') == 0
      and redis.call('HEXISTS', draw, 'drawn_ms') == 0 then
    redis.call('SADD', prequeue, id)
    local member = order .. id
    redis.call('ZADD', prequeue_order, 0, member)
    redis.call('HSET', prequeue_mac, id, member)
    redis.call('RPUSH', prequeue_seqs, arrival_s)
    if remember then
      redis.call('HSET', dedup, key, id)
      redis.call('EXPIRE', dedup, dedup_ttl)
      dedup_exists = true
    end
    return 'prequeue ' .. id .. ' 1'
  end
  if random then
    local member = order .. id
    redis.call('ZADD', lottery, 0, member)
    redis.call('HSET', lottery_mac, id, member)
  end
  if remember then
    redis.call('HSET', dedup, key, id)
    -- The caller also renews this TTL every few seconds while keyed joins go on (RedisStore::join).
    redis.call('EXPIRE', dedup, dedup_ttl)
    dedup_exists = true
  end
  -- How many wait now, this ticket with them. Its seq is the largest ever handed out, so in arrival
  -- order it is the last: its position is this count (the queue's size, not ZRANK's walk of the
  -- skip list). Were some member's score ever larger, the count would only overstate the position.
  local waiting = queue_size()
  -- Nobody else waiting, the room open, the cap not reached and the bank not empty: admit now, as
  -- admit.lua would, and spend one of the bank.
  if J.token ~= '' and waiting == 1
      and tonumber(redis.call('GET', bank) or '0') > 0 then
    local s = redis.call('HMGET', room, 'paused', 'cap', 'rate', 'stock')
    local most_out = tonumber(s[2] or '')
    -- Never more tokens out than units left (docs/DESIGN.md "Stock and sold out").
    local units_left = tonumber(s[4] or '')
    if units_left ~= nil and (most_out == nil or units_left < most_out) then
      most_out = units_left
    end
    -- A rate of 0 admits nobody, like a pause: the bank from the old rate is not spent.
    if s[1] ~= '1' and tonumber(s[3] or '0') > 0
        and (most_out == nil or redis.call('ZCARD', active) < most_out) then
      local now = tonumber(now_ms)
      local expires_at = now + tonumber(J.ttl_ms)
      local keep = tonumber(J.ttl_ms) + tonumber(J.keep_ms)
      local token = J.token
      local token_secret = string.match(token, '([^.]+)$')
      local ticket = prefix .. 'ticket:' .. id
      queue_changed(-redis.call('ZREM', queue, id))
      if random then
        redis.call('ZREM', lottery, order .. id)
        redis.call('HDEL', lottery_mac, id)
      end
      -- Not waiting: its last-heard slot stays 0, as admit.lua leaves an admitted one's.
      seen_bytes[arrival - seq_first + 1] = '\0\0\0\0'
      redis.call('HSET', ticket, 'state', 'TOKEN_ISSUED', 'tok', token, 'exp', expires_at)
      redis.call('PEXPIRE', ticket, keep)
      redis.call('SET', prefix .. 'token:' .. token_secret, id, 'PX', keep)
      redis.call('ZADD', active, expires_at, id)
      redis.call('INCR', popped)
      redis.call('DECR', bank)
      return 'admitted ' .. id .. string.format(' %d', expires_at)
    end
  end
  if ranked then
    return 'waiting ' .. id .. string.format(' 1 %d', position(id, ranked))
  end
  return 'waiting ' .. id .. string.format(' 1 %d', waiting)
end

-- One table for every join's item, filled again for each (join keeps none of it).
local J = {}
local ran, failure = pcall(function()
  for n = 1, ITEMS do
    batch[n] = join(item(n, J))
  end
end)
-- Written even when a join failed partway (a command's error, e.g. a key of the wrong type: Redis
-- keeps what a script wrote before its error): the tickets made before it keep seqs the counter
-- has counted, and their slots.
write_seqs()
if not ran then
  error(failure)
end
return table.concat(batch, '\n')
