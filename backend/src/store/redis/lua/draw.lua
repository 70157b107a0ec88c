-- The draw of a scheduled opening (docs/DESIGN.md "Scheduled opening and the draw"), exactly once
-- and all at once: fenced like admit.lua; refused when made already or when the pre-queue is not
-- exactly the ids given (a ticket joined or left since the caller read it: it reads again).
-- The pre-queue tickets' arrival seqs are handed out again in place order (place k gets the k-th
-- smallest), so everyone who joined after the opening stays behind them; each drawn ticket
-- counts as heard from now; the tags are kept in place order for GET …/draw.
-- KEYS[1] leader   KEYS[2] epoch   KEYS[3] queue (ZSET)   KEYS[4] prequeue (SET)
-- KEYS[5] draw (HASH: seed, drawn_ms, count)   KEYS[6] draw_tags (LIST)
-- ARGV[1] holder   ARGV[2] epoch   ARGV[3] key prefix   ARGV[4] now ms   ARGV[5] n
-- ARGV[6 .. 5+n] ticket ids in place order   ARGV[6+n .. 5+2n] their tags
-- Returns {outcome}: DRAWN (with n), ALREADY, CHANGED, FENCED or NO_SEED.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return {'FENCED'}
end
if redis.call('HEXISTS', KEYS[5], 'seed') == 0 then
  return {'NO_SEED'}
end
if redis.call('HEXISTS', KEYS[5], 'drawn_ms') == 1 then
  return {'ALREADY'}
end
local n = tonumber(ARGV[5])
if redis.call('SCARD', KEYS[4]) ~= n then
  return {'CHANGED'}
end
-- Batched reads and writes (ZMSCORE and SMISMEMBER need Redis >= 6.2): a few calls per 1,000.
local BATCH = 1000
local seqs = {}
local given = {}
for from = 1, n, BATCH do
  local to = math.min(n, from + BATCH - 1)
  local ids = {}
  for i = from, to do
    local id = ARGV[5 + i]
    if given[id] then
      return {'CHANGED'}
    end
    given[id] = true
    ids[#ids + 1] = id
  end
  local scores = redis.call('ZMSCORE', KEYS[3], unpack(ids))
  local members = redis.call('SMISMEMBER', KEYS[4], unpack(ids))
  for j = 1, #ids do
    if not scores[j] or members[j] == 0 then
      return {'CHANGED'}
    end
    seqs[from + j - 1] = tonumber(scores[j])
  end
end
table.sort(seqs)
local prefix = ARGV[3]
local now_s = math.floor(tonumber(ARGV[4]) / 1000)
for from = 1, n, BATCH do
  local to = math.min(n, from + BATCH - 1)
  local zadd = {'XX'}
  local tags = {}
  -- Last-heard slots, one BITFIELD per seen: chunk touched by this batch.
  local fields = {}
  for i = from, to do
    local seq = seqs[i]
    zadd[#zadd + 1] = seq
    zadd[#zadd + 1] = ARGV[5 + i]
    tags[#tags + 1] = ARGV[5 + n + i]
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
  redis.call('RPUSH', KEYS[6], unpack(tags))
end
redis.call('DEL', KEYS[4])
redis.call('HSET', KEYS[5], 'drawn_ms', ARGV[4], 'count', n)
return {'DRAWN', n}
