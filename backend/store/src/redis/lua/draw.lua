-- One step of the draw of a scheduled opening (docs/DESIGN.md "Scheduled opening and the draw"):
-- places the next `per_step` pre-queue tickets in drawn order, and ends the draw when none is left.
-- Fenced like admit.lua; refused when the draw is made already.
-- The first step closes the pre-queue: `started_ms` is set (a join is an ordinary one from then
-- on: join.lua reads it) and `prequeue_order` (every pre-queue ticket, members
-- `hex(HMAC-SHA256(seed, tag)) .. tag .. id`, written by join.lua) is renamed `draw_sealed`, so
-- the set of tickets drawn is fixed there: a leaver after it leaves the queue and `prequeue`
-- (leave.lua) but keeps its line in the draw (its place is skipped: `ZADD XX` finds no ticket).
-- The order is not the committed seed's (issue 42: whoever writes the store before the
-- pre-queue opens could have chosen that seed): until `tags_sha256` is recorded a step answers
-- {MIX} and the caller computes the mixed seed from the sealed tags (Lua has no HMAC) and files
-- the sealed tickets under it into `draw_order` (draw_mix.lua); then ZPOPMIN on `draw_order`
-- (same member shape, lexicographic = drawn order) takes the next places.
-- Every step keeps the pre-queue's tickets PRE_QUEUE (they stay in `prequeue`, and admit.lua
-- admits nobody while it exists) until the last step deletes it: all at once for shoppers, while
-- Redis is never blocked for more than one step. A step that dies changes nothing (one script);
-- the next leader goes on where the last step ended (`placed`, the lists): no place is drawn
-- twice or skipped.
-- Places take the pre-queue's own arrival seqs in order: `prequeue_seqs` lists the seq of every
-- pre-queue join in arrival order (ascending; a leaver's stays, a join cannot be undone in a list
-- cheaply), and each step LPOPs as many as it places, so place j ends with the j-th smallest and
-- arrivals after the opening stay behind every drawn ticket. Between steps a placed ticket may
-- share its seq with an undrawn one that has not moved yet; nobody sees it (no positions in the
-- pre-queue, no admission, no skips) and the last step leaves every seq distinct. The seqs left
-- in the list at the end (as many as leavers) held nobody by then: their last-heard slots are
-- cleared.
-- KEYS: room leader epoch queue prequeue draw draw_tags prequeue_order prequeue_mac prequeue_seqs draw_sealed draw_order
-- ARGV: generation holder fence prefix now_ms per_step lease_ms
-- queue: ZSET; prequeue: SET of ids; draw: HASH seed, started_ms, placed, tags_sha256,
-- draw_seed, then drawn_ms, count; draw_tags: LIST; prequeue_order, draw_sealed, draw_order:
-- ZSET; prequeue_mac: HASH id -> member; prequeue_seqs: LIST.
-- holder, fence: the lease holder and its epoch; every step renews its lease, as admit.lua does.
-- Returns {DRAWN, count} (the last step), {PLACED, placed so far} (call again), {MIX} (file the
-- mixed order, then call again), {ALREADY}, {FENCED} or {NO_SEED}.
local refused = refusal(room, generation)
if refused then
  return refused
end
if redis.call('GET', leader) ~= holder or redis.call('GET', epoch) ~= fence then
  return {'FENCED'}
end
redis.call('PEXPIRE', leader, lease_ms)
local record = redis.call('HMGET', draw, 'seed', 'drawn_ms', 'count', 'placed', 'tags_sha256')
if not record[1] then
  return {'NO_SEED'}
end
if record[2] then
  return {'ALREADY', record[3]}
end
if not record[4] then
  -- From now on a join is an ordinary one (join.lua reads `started_ms`), and the pre-queue's
  -- set of tickets is fixed (leave.lua removes leavers from `prequeue_order`, gone from now).
  redis.call('HSET', draw, 'started_ms', now_ms, 'placed', 0)
  if redis.call('EXISTS', prequeue_order) == 1 then
    redis.call('RENAME', prequeue_order, draw_sealed)
  end
end
if not record[5] then
  return {'MIX'}
end
local placed = tonumber(record[4] or '0')
local BATCH = 1000 -- unpack() takes at most a few thousand values
local popped = redis.call('ZPOPMIN', draw_order, tonumber(per_step))
local k = #popped / 2
local seqs = {}
if k > 0 then
  seqs = redis.call('LPOP', prequeue_seqs, k) or {}
  if #seqs < k then
    return redis.error_reply('draw: the pre-queue holds fewer seqs than tickets')
  end
end
local now_s = math.floor(tonumber(now_ms) / 1000)
-- Last-heard slots (u32 big-endian at byte (seq mod 65536) * 4 of `seen:<seq / 65536>`, as
-- BITFIELD writes them): one SETRANGE per run of consecutive seqs in one chunk (a pre-queue's
-- seqs are mostly consecutive), not one BITFIELD operation per seq.
local function set_seen(seq_list, value)
  local bytes = string.char(math.floor(value / 16777216) % 256, math.floor(value / 65536) % 256,
                            math.floor(value / 256) % 256, value % 256)
  local i = 1
  while i <= #seq_list do
    local first = tonumber(seq_list[i])
    local run = 1
    while i + run <= #seq_list and tonumber(seq_list[i + run]) == first + run
        and (first + run) % 65536 ~= 0 do
      run = run + 1
    end
    redis.call('SETRANGE', prefix .. 'seen:' .. math.floor(first / 65536), (first % 65536) * 4,
               string.rep(bytes, run))
    i = i + run
  end
end
-- Place j of this step takes seqs[j] (ascending); each counts as heard from now. A ticket that
-- left after the pre-queue closed is not in `queue`: `ZADD XX` skips it, its tag is published
-- all the same (it was in the draw), and its seq is held by nobody.
for from = 1, k, BATCH do
  local zadd, tags = {'XX'}, {}
  for j = from, math.min(k, from + BATCH - 1) do
    local member = popped[2 * j - 1]
    zadd[#zadd + 1] = seqs[j]
    zadd[#zadd + 1] = string.sub(member, 77)
    tags[#tags + 1] = string.sub(member, 65, 76)
  end
  redis.call('ZADD', queue, unpack(zadd))
  redis.call('RPUSH', draw_tags, unpack(tags))
end
set_seen(seqs, now_s)
placed = placed + k
if k > 0 then
  redis.call('HSET', draw, 'placed', placed)
end
if redis.call('ZCARD', draw_order) > 0 then
  return {'PLACED', placed}
end
set_seen(redis.call('LRANGE', prequeue_seqs, 0, -1), 0)
redis.call('DEL', prequeue, prequeue_mac, prequeue_seqs)
redis.call('HSET', draw, 'drawn_ms', now_ms, 'count', placed)
return {'DRAWN', placed}
