-- A page of a room's waiting line for the admin API (issue 14), read in one step.
-- KEYS[1] queue (ZSET id -> arrival seq)
-- ARGV[1] the room's key prefix (`vestibule:{r}:`)   ARGV[2..3] the first and last 0-based rank
-- Returns {total, id, born, seen, id, born, seen, …}: each ticket's join time and last heard time
-- from `born:`/`seen:` (u32 Unix seconds; 0 = unknown), in queue order.
local total = redis.call('ZCARD', KEYS[1])
local page = redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3], 'WITHSCORES')
local reply = {total}
for i = 1, #page, 2 do
  local seq = tonumber(page[i + 1])
  local chunk = math.floor(seq / 65536)
  local slot = '#' .. (seq % 65536)
  local born = redis.call('BITFIELD', ARGV[1] .. 'born:' .. chunk, 'GET', 'u32', slot)[1]
  local seen = redis.call('BITFIELD', ARGV[1] .. 'seen:' .. chunk, 'GET', 'u32', slot)[1]
  table.insert(reply, page[i])
  table.insert(reply, born)
  table.insert(reply, seen)
end
return reply
