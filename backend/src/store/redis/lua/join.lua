-- Join a room's queue, idempotently: one or more joins of one room in one call (a group commit:
-- the joins a serving thread has waiting when its last call returned, `store/redis/group_commit.rs`),
-- each run in turn exactly as if it had come alone; the reply has one entry per join, in order.
-- The arguments shared by the batch come first, then `PER_JOIN` arguments for each join; below,
-- `A[i]` is the join's i-th argument (numbered as when this script took one join, so that the
-- comments of the other scripts and the docs still find them).
-- ARGV[1] key prefix "vestibule:{room}:" (A[3])   ARGV[2] dedup hash TTL in seconds (A[4])
-- ARGV[3] now, Unix ms (A[6])   then `PER_JOIN` per join: A[1] A[2] A[5] A[7..16] in that order.
-- KEYS[1] queue (ZSET id -> arrival seq)   KEYS[2] seq (STRING counter)   KEYS[3] dedup (HASH key -> id)
-- A[1] fresh random ticket id   A[2] dedup key or ""   A[3] key prefix "vestibule:{room}:"
-- A[4] dedup hash TTL in seconds   A[5] the key's derived id (HMAC of the key with the room
-- secret, computed by the caller; "" without a key)   A[6] now, Unix ms
-- A[7] client of the join limit ("" = no limit)   A[8] ms between refilled joins
-- A[9] joins per burst
-- Instant admission (docs/DESIGN.md "No wait when there is no line"): KEYS[4] settings (HASH)
-- KEYS[5] active (ZSET)   KEYS[6] bank (STRING: instant admissions the scheduler's unused quota
-- left, written by admit.lua)   KEYS[7] popped (STRING)   A[10] a fresh entry token ("" = never
-- admit at once)   A[11] token TTL ms   A[12] keep ms
-- Scheduled opening (docs/DESIGN.md "Scheduled opening and the draw"): KEYS[8] prequeue (SET of
-- ticket ids not drawn yet)   KEYS[9] draw (HASH: seed, drawn_ms, count)   A[13] "1" = a join
-- in the pre-queue window: the new ticket takes its arrival seq as usual and is also added to
-- the pre-queue (unless the draw was made already: then it is an ordinary join); never admitted
-- at once. A ticket found in the pre-queue answers position -3. The drawn order is kept from the
-- join on (draw.lua): KEYS[10] prequeue_order (ZSET, scores 0, member `mac .. tag .. id`)
-- KEYS[11] prequeue_mac (HASH id -> that member)   A[15] `mac .. tag` of A[1]'s id
-- A[16] `mac .. tag` of A[5]'s id (mac: 64 hex digits of HMAC-SHA256(seed, tag), tag: 12
-- hex digits; computed by the caller, who knows the seed)   KEYS[12] prequeue_seqs (LIST: the
-- seqs of pre-queue joins in arrival order, handed out again by draw.lua). Once the draw has
-- started (`started_ms`) a join in that window is an ordinary one.
-- A[14] the settings version (`ver` in KEYS[4]) the caller decided the join on ("" = any): when
-- the settings have another version (an operator changed them through another replica since
-- this one read them) nothing changes and the reply is {"", -5, 0}; the caller reads them again.
-- The reply is one string: a line per join, in order, joined by "\n", each line the join's answer
-- below with its fields joined by " " (the id is a ticket id or "", the rest integers): one bulk
-- string costs Redis and the server's reply parser far less than an array of 3 or 4 values per
-- join (`store/redis/group_commit.rs` reads it back).
-- Answers, per join, {id, created (0|1), position (-1 when the existing ticket is no longer waiting)}, or
-- {"", -2, ms to wait} when a join that would create a ticket is over the client's limit, or
-- {"", -3, 0} / {"", -4, 0} when it would create one in a sold-out / closed room (settings
-- `soldout` / `closed` = 1; nothing changed), or
-- {id, 1, 0, token expiry ms} when the new ticket was admitted at once.
-- A new ticket counts as heard from now (`seen:<seq / 65536>`: u32 Unix seconds per arrival seq);
-- its join time goes to `born:<seq / 65536>` the same way.
-- A skipped ticket within its hold (HELD, `exp` = end of the hold) is live: {id, 0, -1}.
--
-- A key's first ticket takes the key's derived id, so a retry finds it again by recomputing the id
-- and the key costs no dedup entry. Only a re-join after that ticket LEFT or EXPIRED needs another
-- id: it gets the fresh random one, remembered in the dedup hash.
-- Random queueing (docs/DESIGN.md "Random queueing"): in a room whose settings say `qmethod`
-- random, the new ticket also goes into KEYS[13] lottery (ZSET, scores 0, member `mac .. tag ..
-- id`, the key A[15] / A[16] as for the pre-queue) and KEYS[14] lottery_mac (HASH id ->
-- member), and positions are ranks in the lottery, unless KEYS[15] lottery_filing exists (the
-- waiting tickets of a switch are still being filed: arrival order until then). A join in a
-- random room without its keys answers {"", -6, 0} and changes nothing: the caller computes them
-- (it needs the seed) and joins again.
-- KEYS[16] gone (the room's tombstone): a room deleted through another replica takes no join:
-- {"", -7, 0} (nothing changed). Settings lost by a Redis restart are no reason to refuse.
local PER_JOIN = 13
local batch = {}
local joins = (#ARGV - 3) / PER_JOIN
if redis.call('EXISTS', KEYS[16]) == 1 then
  for n = 1, joins do
    batch[n] = ' -7 0'
  end
  return table.concat(batch, '\n')
end
-- The settings a join reads, in one call for the batch (nothing else runs meanwhile): version,
-- queueing method, sold out, closed. A join admitted at once does not change them.
local sale = redis.call('HMGET', KEYS[4], 'ver', 'qmethod', 'soldout', 'closed')
-- Whether the dedup hash exists, once for the batch: it holds only re-joins after LEFT or
-- EXPIRED, so in a rush it is usually absent and a key's look-up there is skipped. A join of the
-- batch that writes it sets this.
local dedup_exists = redis.call('EXISTS', KEYS[3]) == 1
-- How many wait, read once for the batch (ZCARD) when a join first needs it, then kept by the
-- batch's own changes to the queue (a ticket added, one admitted at once): nothing else runs
-- between the joins of a call.
local queued = nil
local function queue_size()
  if queued == nil then
    queued = redis.call('ZCARD', KEYS[1])
  end
  return queued
end
local function queue_changed(by)
  if queued ~= nil then
    queued = queued + by
  end
end

-- Now in Unix seconds (A[6] is in ms), as the u32 big-endian bytes a `seen:` / `born:` slot holds.
local now_secs = math.floor(tonumber(ARGV[3]) / 1000)
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
    seq_last = tonumber(redis.call('GET', KEYS[2]) or '0')
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
  redis.call('INCRBY', KEYS[2], string.format('%d', seq_last - seq_first + 1))
  local from = seq_first
  while from <= seq_last do
    local chunk = math.floor(from / 65536)
    local to = math.min(seq_last, chunk * 65536 + 65535)
    local offset = string.format('%d', (from % 65536) * 4)
    local chunk_s = string.format('%d', chunk)
    redis.call('SETRANGE', ARGV[1] .. 'seen:' .. chunk_s, offset,
               table.concat(seen_bytes, '', from - seq_first + 1, to - seq_first + 1))
    -- When it joined (the admin API's waiters list; issue 14), laid out as `seen:`.
    redis.call('SETRANGE', ARGV[1] .. 'born:' .. chunk_s, offset, string.rep(now_bytes, to - from + 1))
    from = to + 1
  end
end

-- A waiting ticket's position: its rank in the lottery when the room's positions are `ranked`
-- there, else in arrival order.
local function position(id, ranked)
  if ranked then
    local member = redis.call('HGET', KEYS[14], id)
    if member then
      return redis.call('ZRANK', KEYS[13], member) + 1
    end
  end
  return redis.call('ZRANK', KEYS[1], id) + 1
end

-- One join; answers its reply's fields (see the header) as values, not a table.
local function join(A)
  if A[14] ~= '' and (sale[1] or '0') ~= A[14] then
    return '', -5, 0
  end
  local random = sale[2] == 'random'
  if random and A[15] == '' then
    return '', -6, 0
  end
  local ranked = random and redis.call('EXISTS', KEYS[15]) == 0
  local prefix = A[3]
  local key = A[2]
  local id = A[1]
  local remember = false
  local order = A[15]
  if key ~= '' then
    local mapped = dedup_exists and redis.call('HGET', KEYS[3], key) or nil
    local candidate = mapped or A[5]
    local rank = redis.call('ZRANK', KEYS[1], candidate)
    if rank then
      if redis.call('SISMEMBER', KEYS[8], candidate) == 1 then
        return candidate, 0, -3
      end
      return candidate, 0, position(candidate, ranked)
    end
    local ticket = redis.call('HMGET', prefix .. 'ticket:' .. candidate, 'state', 'exp')
    local state = ticket[1]
    -- A ticket that left, or whose token expired unused, is no reason to refuse a fresh place.
    local live_until = tonumber(ticket[2] or '0')
    -- SOLD_OUT: taken out of a sold-out room's line by admit.lua; its key still finds it.
    if state == 'COMPLETED' or state == 'SOLD_OUT'
        or ((state == 'TOKEN_ISSUED' or state == 'HELD') and live_until > tonumber(A[6])) then
      return candidate, 0, -1
    end
    if not mapped and not state then
      -- The key's first join (or its ticket has been forgotten): the derived id, no dedup entry.
      id = A[5]
      order = A[16]
    else
      remember = true
    end
  end
  -- A sold-out or closed room makes no new tickets (a join that found its ticket was answered above).
  if sale[3] == '1' then
    return '', -3, 0
  end
  if sale[4] == '1' then
    return '', -4, 0
  end
  -- The client's join limit (GCRA, the arithmetic of store::gcra), checked only now: a join that
  -- found its ticket above never counts, and a refused one changes nothing.
  if A[7] ~= '' then
    local now = tonumber(A[6])
    local period = tonumber(A[8])
    local limit_key = prefix .. 'limit:' .. A[7]
    local tat = math.max(tonumber(redis.call('GET', limit_key) or '0'), now)
    local allowed_at = tat + period - tonumber(A[9]) * period
    if now < allowed_at then
      return '', -2, allowed_at - now
    end
    redis.call('SET', limit_key, string.format('%d', tat + period), 'PX',
               string.format('%d', tat + period - now))
  end
  -- Heard from now and born now: its slots are written with the call's others (write_seqs).
  local seq = take_seq()
  -- The seq as a string made with integer formatting (a number handed to redis.call or joined to
  -- a string is formatted as a float).
  local seq_s = string.format('%d', seq)
  -- NX: a join never moves an existing member (belt and braces: a random id is fresh, a derived one
  -- was checked absent above).
  queue_changed(redis.call('ZADD', KEYS[1], 'NX', seq_s, id))
  if A[13] == '1' and redis.call('HEXISTS', KEYS[9], 'started_ms') == 0
      and redis.call('HEXISTS', KEYS[9], 'drawn_ms') == 0 then
    redis.call('SADD', KEYS[8], id)
    local member = order .. id
    redis.call('ZADD', KEYS[10], 0, member)
    redis.call('HSET', KEYS[11], id, member)
    redis.call('RPUSH', KEYS[12], seq_s)
    if remember then
      redis.call('HSET', KEYS[3], key, id)
      redis.call('EXPIRE', KEYS[3], A[4])
      dedup_exists = true
    end
    return id, 1, -3
  end
  if random then
    local member = order .. id
    redis.call('ZADD', KEYS[13], 0, member)
    redis.call('HSET', KEYS[14], id, member)
  end
  if remember then
    redis.call('HSET', KEYS[3], key, id)
    -- The caller also renews this TTL every few seconds while keyed joins go on (RedisStore::join).
    redis.call('EXPIRE', KEYS[3], A[4])
    dedup_exists = true
  end
  -- How many wait now, this ticket with them. Its seq is the largest ever handed out, so in arrival
  -- order it is the last: its position is this count (the queue's size, not ZRANK's walk of the
  -- skip list). Were some member's score ever larger, the count would only overstate the position.
  local waiting = queue_size()
  -- Nobody else waiting, the room open, the cap not reached and the bank not empty: admit now, as
  -- admit.lua would, and spend one of the bank.
  if A[10] ~= '' and waiting == 1
      and tonumber(redis.call('GET', KEYS[6]) or '0') > 0 then
    local s = redis.call('HMGET', KEYS[4], 'paused', 'cap', 'rate', 'stock')
    local cap = tonumber(s[2] or '')
    -- Never more tokens out than units left (docs/DESIGN.md "Stock and sold out").
    local left = tonumber(s[4] or '')
    if left ~= nil and (cap == nil or left < cap) then
      cap = left
    end
    -- A rate of 0 admits nobody, like a pause: the bank from the old rate is not spent.
    if s[1] ~= '1' and tonumber(s[3] or '0') > 0
        and (cap == nil or redis.call('ZCARD', KEYS[5]) < cap) then
      local now = tonumber(A[6])
      local expires_at = now + tonumber(A[11])
      local keep = tonumber(A[11]) + tonumber(A[12])
      local token = A[10]
      local secret = string.match(token, '([^.]+)$')
      local ticket = prefix .. 'ticket:' .. id
      queue_changed(-redis.call('ZREM', KEYS[1], id))
      if random then
        redis.call('ZREM', KEYS[13], order .. id)
        redis.call('HDEL', KEYS[14], id)
      end
      -- Not waiting: its last-heard slot stays 0, as admit.lua leaves an admitted one's.
      seen_bytes[seq - seq_first + 1] = '\0\0\0\0'
      redis.call('HSET', ticket, 'state', 'TOKEN_ISSUED', 'tok', token, 'exp', expires_at)
      redis.call('PEXPIRE', ticket, keep)
      redis.call('SET', prefix .. 'token:' .. secret, id, 'PX', keep)
      redis.call('ZADD', KEYS[5], expires_at, id)
      redis.call('INCR', KEYS[7])
      redis.call('DECR', KEYS[6])
      return id, 1, 0, expires_at
    end
  end
  if ranked then
    return id, 1, position(id, ranked)
  end
  return id, 1, waiting
end

-- One table for every join's arguments, filled again for each (join keeps none of it).
local A = {}
A[3], A[4], A[6] = ARGV[1], ARGV[2], ARGV[3]
local ran, failure = pcall(function()
  for n = 1, joins do
    local base = 3 + (n - 1) * PER_JOIN
    A[1], A[2], A[5] = ARGV[base + 1], ARGV[base + 2], ARGV[base + 3]
    for i = 7, 16 do
      A[i] = ARGV[base + i - 3]
    end
    local id, created, place, expiry = join(A)
    local line = id .. string.format(' %d %d', created, place)
    if expiry then
      line = line .. string.format(' %d', expiry)
    end
    batch[n] = line
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
