-- One batch of the draw's mixed order (docs/DESIGN.md "Scheduled opening and the draw"; issue 42):
-- the pre-queue as it closed (`draw_sealed`, draw.lua's first step) filed under keys the caller
-- computed from the mixed seed (Lua has no HMAC): SHA-256 of the committed seed, of the sealed
-- tags' hash and of the beacon's value, if any.
-- KEYS: room leader epoch draw draw_sealed draw_order
-- ARGV: generation holder fence last tags_sha256 draw_seed
-- EACH: member
-- member: `hex(HMAC-SHA256(draw_seed, tag)) .. tag .. id`, one per sealed ticket. Fenced like
-- draw.lua, so only the leader files. Batches are idempotent (ZADD of the same members), so a
-- leader that dies mid-way leaves the next one to file everything again; last = "1": the
-- caller's read of `draw_sealed` ends with this batch, which records the mix (the steps then
-- place from `draw_order`) and deletes `draw_sealed`.
-- Returns {FILED} (the mix recorded when last), {ALREADY} (recorded before) or {FENCED}.
local refused = refusal(room, generation)
if refused then
  return refused
end
if redis.call('GET', leader) ~= holder or redis.call('GET', epoch) ~= fence then
  return {'FENCED'}
end
if redis.call('HEXISTS', draw, 'tags_sha256') == 1 then
  return {'ALREADY'}
end
local BATCH = 1000 -- unpack() takes at most a few thousand values
local ticket = {}
for from = 1, ITEMS, BATCH do
  local zadd = {}
  for i = from, math.min(ITEMS, from + BATCH - 1) do
    item(i, ticket)
    zadd[#zadd + 1] = 0
    zadd[#zadd + 1] = ticket.member
  end
  redis.call('ZADD', draw_order, unpack(zadd))
end
if last == '1' then
  redis.call('HSET', draw, 'tags_sha256', tags_sha256, 'draw_seed', draw_seed)
  redis.call('DEL', draw_sealed)
end
return {'FILED'}
