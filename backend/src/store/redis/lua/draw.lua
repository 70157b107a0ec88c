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
local seqs = {}
local given = {}
for i = 1, n do
  local id = ARGV[5 + i]
  local seq = redis.call('ZSCORE', KEYS[3], id)
  if given[id] or not seq or redis.call('SISMEMBER', KEYS[4], id) == 0 then
    return {'CHANGED'}
  end
  given[id] = true
  seqs[i] = tonumber(seq)
end
table.sort(seqs)
local prefix = ARGV[3]
local now_s = math.floor(tonumber(ARGV[4]) / 1000)
local BATCH = 1000
for from = 1, n, BATCH do
  local to = math.min(n, from + BATCH - 1)
  local zadd = {'XX'}
  local tags = {}
  for i = from, to do
    zadd[#zadd + 1] = seqs[i]
    zadd[#zadd + 1] = ARGV[5 + i]
    tags[#tags + 1] = ARGV[5 + n + i]
    local seq = seqs[i]
    redis.call('BITFIELD', prefix .. 'seen:' .. math.floor(seq / 65536), 'SET', 'u32',
               '#' .. (seq % 65536), now_s)
  end
  redis.call('ZADD', KEYS[3], unpack(zadd))
  redis.call('RPUSH', KEYS[6], unpack(tags))
end
redis.call('DEL', KEYS[4])
redis.call('HSET', KEYS[5], 'drawn_ms', ARGV[4], 'count', n)
return {'DRAWN', n}
