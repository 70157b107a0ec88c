-- The room's draw seed, written once: the first caller's seed wins, later callers read it.
-- KEYS: room draw
-- ARGV: generation seed
-- draw: HASH seed, started_ms, placed, tags_sha256, drawn_ms, count (draw.lua, draw_mix.lua).
-- Returns {seed, drawn_ms or false, count or false, tags_sha256 or false}.
local refused = refusal(room, generation)
if refused then
  return refused
end
redis.call('HSETNX', draw, 'seed', seed)
return redis.call('HMGET', draw, 'seed', 'drawn_ms', 'count', 'tags_sha256')
