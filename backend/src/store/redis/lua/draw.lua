-- One step of the draw of a scheduled opening (docs/DESIGN.md "Scheduled opening and the draw"):
-- places the next ARGV[5] pre-queue tickets in drawn order, and ends the draw when none is left.
-- Fenced like admit.lua; refused when the draw is made already.
-- The order is kept since the joins: `prequeue_order` is a ZSET, every score 0, of members
-- `hex(HMAC-SHA256(seed, tag)) .. tag .. id` (64 + 12 characters, then the id; written by
-- join.lua), so its lexicographic order is the drawn order and ZPOPMIN takes the next places.
-- Every step keeps the pre-queue's tickets PRE_QUEUE (they stay in `prequeue`, and admit.lua
-- admits nobody while it exists) until the last step deletes it: all at once for shoppers, while
-- Redis is never blocked for more than one step. A step that dies changes nothing (one script);
-- the next leader goes on where the last step ended (`placed`, `last_seq`): no place is drawn
-- twice or skipped.
-- Places take the pre-queue's own arrival seqs in order: a step placing k tickets gives them the
-- k smallest seqs still held by undrawn pre-queue tickets (> `last_seq`); an undrawn ticket that
-- held one of those takes a seq freed by a placed ticket instead (its place is drawn later). So
-- place j ends with the j-th smallest pre-queue seq, arrivals after the opening stay behind.
-- KEYS[1] leader   KEYS[2] epoch   KEYS[3] queue (ZSET)   KEYS[4] prequeue (SET of ids)
-- KEYS[5] draw (HASH: seed, started_ms, placed, last_seq, then drawn_ms, count)
-- KEYS[6] draw_tags (LIST)   KEYS[7] prequeue_order (ZSET)   KEYS[8] prequeue_mac (HASH id -> member)
-- ARGV[1] holder   ARGV[2] epoch   ARGV[3] key prefix   ARGV[4] now ms   ARGV[5] places per step
-- ARGV[6] lease ms: every step renews the leader's lease, as admit.lua does
-- Returns {DRAWN, count} (the last step, or made already: {ALREADY, count}), {PLACED, placed so
-- far} (call again), {FENCED} or {NO_SEED}.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return {'FENCED'}
end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
local record = redis.call('HMGET', KEYS[5], 'seed', 'drawn_ms', 'count', 'placed', 'last_seq')
if not record[1] then
  return {'NO_SEED'}
end
if record[2] then
  return {'ALREADY', record[3]}
end
if not record[4] then
  -- From now on a join is an ordinary one (join.lua reads `started_ms`).
  redis.call('HSET', KEYS[5], 'started_ms', ARGV[4], 'placed', 0)
end
local placed = tonumber(record[4] or '0')
local BATCH = 1000 -- unpack() takes at most a few thousand values
local popped = redis.call('ZPOPMIN', KEYS[7], tonumber(ARGV[5]))
local ids, tags, dropped = {}, {}, {}
for i = 1, #popped, 2 do
  local member = popped[i]
  ids[#ids + 1] = string.sub(member, 77)
  tags[#tags + 1] = string.sub(member, 65, 76)
end
-- The seqs the chosen tickets hold now (a ticket not in the queue any more is not placed).
local chosen_ids, chosen_tags, held, chosen = {}, {}, {}, {}
for from = 1, #ids, BATCH do
  local batch = {}
  for i = from, math.min(#ids, from + BATCH - 1) do
    batch[#batch + 1] = ids[i]
  end
  local scores = redis.call('ZMSCORE', KEYS[3], unpack(batch))
  for j = 1, #batch do
    local i = from + j - 1
    if scores[j] then
      chosen_ids[#chosen_ids + 1] = ids[i]
      chosen_tags[#chosen_tags + 1] = tags[i]
      held[#held + 1] = tonumber(scores[j])
      chosen[ids[i]] = true
    else
      dropped[#dropped + 1] = ids[i]
    end
  end
end
local k = #chosen_ids
-- The k smallest seqs of undrawn pre-queue tickets, with their holders.
local small, holders = {}, {}
local lower = record[5] and ('(' .. record[5]) or '-inf'
while #small < k do
  local page = redis.call('ZRANGEBYSCORE', KEYS[3], lower, '+inf', 'WITHSCORES', 'LIMIT', 0, BATCH)
  if #page == 0 then
    return redis.error_reply('draw: the pre-queue holds fewer seqs than tickets')
  end
  local page_ids = {}
  for j = 1, #page, 2 do
    page_ids[#page_ids + 1] = page[j]
  end
  local member = redis.call('SMISMEMBER', KEYS[4], unpack(page_ids))
  for j = 1, #page_ids do
    if member[j] == 1 and #small < k then
      small[#small + 1] = tonumber(page[2 * j])
      holders[#holders + 1] = page_ids[j]
    end
  end
  lower = '(' .. page[#page]
end
local taken = {}
for j = 1, k do
  taken[small[j]] = true
end
local freed = {}
for j = 1, k do
  if not taken[held[j]] then
    freed[#freed + 1] = held[j]
  end
end
table.sort(freed)
local displaced = {}
for j = 1, k do
  if not chosen[holders[j]] then
    displaced[#displaced + 1] = holders[j]
  end
end
-- New seqs: the chosen in drawn order take `small`, the displaced take `freed`. Every seq that
-- changed hands counts as heard from now.
local moves = {}
for j = 1, k do
  moves[#moves + 1] = {small[j], chosen_ids[j]}
end
for j = 1, #displaced do
  moves[#moves + 1] = {freed[j], displaced[j]}
end
local prefix = ARGV[3]
local now_s = math.floor(tonumber(ARGV[4]) / 1000)
for from = 1, #moves, BATCH do
  local zadd = {'XX'}
  local fields = {}
  for i = from, math.min(#moves, from + BATCH - 1) do
    local seq, id = moves[i][1], moves[i][2]
    zadd[#zadd + 1] = seq
    zadd[#zadd + 1] = id
    local chunk = prefix .. 'seen:' .. math.floor(seq / 65536)
    local ops = fields[chunk]
    if not ops then
      ops = {}
      fields[chunk] = ops
    end
    ops[#ops + 1] = 'SET'
    ops[#ops + 1] = 'u32'
    ops[#ops + 1] = '#' .. (seq % 65536)
    ops[#ops + 1] = now_s
  end
  for chunk, ops in pairs(fields) do
    redis.call('BITFIELD', chunk, unpack(ops))
  end
  redis.call('ZADD', KEYS[3], unpack(zadd))
end
for from = 1, #ids, BATCH do
  local batch_tags, batch_ids = {}, {}
  for i = from, math.min(#ids, from + BATCH - 1) do
    batch_ids[#batch_ids + 1] = ids[i]
  end
  for i = from, math.min(k, from + BATCH - 1) do
    batch_tags[#batch_tags + 1] = chosen_tags[i]
  end
  if #batch_tags > 0 then
    redis.call('RPUSH', KEYS[6], unpack(batch_tags))
  end
  redis.call('HDEL', KEYS[8], unpack(batch_ids))
end
for _, id in ipairs(dropped) do
  redis.call('SREM', KEYS[4], id)
end
placed = placed + k
if k > 0 then
  redis.call('HSET', KEYS[5], 'placed', placed, 'last_seq', small[k])
end
if redis.call('ZCARD', KEYS[7]) > 0 then
  return {'PLACED', placed}
end
redis.call('DEL', KEYS[4], KEYS[8])
redis.call('HSET', KEYS[5], 'drawn_ms', ARGV[4], 'count', placed)
return {'DRAWN', placed}
