-- A room document the store lost (Redis restarted without persistence), written back as a replica
-- running the room held it: generation, version and every setting in one step, and only while the
-- document is still missing, so the first replica to write it wins and a change made after it is
-- never undone.
-- KEYS: room gen
-- ARGV: generation version cfg
-- EACH: field value present
-- The counter is moved up to the version, so later generations and versions stay above it.
-- Returns {'written', document} or {'exists', document} (the document as HGETALL answers it).
if redis.call('EXISTS', room) == 1 then
  return {'exists', redis.call('HGETALL', room)}
end
redis.call('HSET', room, 'gen', generation, 'ver', version, 'state', 'live', 'cfg', cfg)
local field = {}
for i = 1, ITEMS do
  item(i, field)
  if field.present == '1' then
    redis.call('HSET', room, field.field, field.value)
  end
end
if tonumber(redis.call('GET', gen) or '0') < tonumber(version) then
  redis.call('SET', gen, version)
end
return {'written', redis.call('HGETALL', room)}
