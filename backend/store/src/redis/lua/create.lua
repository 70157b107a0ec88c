-- A room created (through the admin API, or seeded by `--rooms`): the slug's next generation and
-- its whole document written in one step, so that nobody ever sees half a room. Refused while a
-- live generation holds the slug.
-- KEYS: room gen
-- ARGV: slug_prefix secret cfg
-- EACH: field value present
-- slug_prefix: `vestibule:{r}:`; the new generation's secret (the HMAC key of derived ticket ids)
-- goes under its prefix (`vestibule:{r}:g<n>:secret`). cfg: the settings no script reads (JSON);
-- each item a script field (`present` 1 = set to `value`, 0 = absent).
-- The generation is the counter's next value, above every generation and version the document
-- had (a counter lost on its own is moved past them).
-- Returns {'created', document} or {'exists', document}: the document as HGETALL answers it.
if redis.call('HGET', room, 'state') == 'live' then
  return {'exists', redis.call('HGETALL', room)}
end
local last = tonumber(redis.call('HGET', room, 'ver') or '0')
local generation = redis.call('INCR', gen)
if generation <= last then
  generation = last + 1
  redis.call('SET', gen, string.format('%d', generation))
end
local n = string.format('%d', generation)
redis.call('DEL', room)
redis.call('HSET', room, 'gen', n, 'ver', n, 'state', 'live', 'cfg', cfg)
local field = {}
for i = 1, ITEMS do
  item(i, field)
  if field.present == '1' then
    redis.call('HSET', room, field.field, field.value)
  end
end
redis.call('SET', slug_prefix .. 'g' .. n .. ':secret', secret)
return {'created', redis.call('HGETALL', room)}
