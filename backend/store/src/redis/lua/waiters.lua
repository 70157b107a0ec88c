-- A page of a room's waiting line for the admin API, read in one step.
-- KEYS: room queue
-- ARGV: generation prefix first last
-- queue: ZSET id -> arrival seq. prefix: the generation's key prefix. first, last: 0-based ranks.
-- Returns {total, id, born, seen, id, born, seen, …}: each ticket's join time and last heard time
-- from `born:`/`seen:` (u32 Unix seconds; 0 = unknown), in queue order.
local refused = refusal(room, generation)
if refused then
  return refused
end
local total = redis.call('ZCARD', queue)
local page = redis.call('ZRANGE', queue, first, last, 'WITHSCORES')
local reply = {total}
for i = 1, #page, 2 do
  local seq = tonumber(page[i + 1])
  local chunk = math.floor(seq / 65536)
  local slot = '#' .. (seq % 65536)
  local born = redis.call('BITFIELD', prefix .. 'born:' .. chunk, 'GET', 'u32', slot)[1]
  local seen = redis.call('BITFIELD', prefix .. 'seen:' .. chunk, 'GET', 'u32', slot)[1]
  table.insert(reply, page[i])
  table.insert(reply, born)
  table.insert(reply, seen)
end
return reply
