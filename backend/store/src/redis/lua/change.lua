-- A change of a room's settings: a compare-and-set on (generation, version). The caller made the
-- new settings from the document at version `expected`; nothing is written when another version
-- is in force.
-- KEYS: room gen lottery lottery_mac lottery_filing left_count
-- ARGV: generation expected cfg
-- EACH: field value present
-- cfg: the new settings no script reads (JSON). Each item: a script field the change sets
-- (`present` 1) or removes (0). Rules kept here whatever the caller sends: the sold-out mark is
-- never removed, and a stock of 0 sets it; a switch to random queueing sets lottery_filing (the
-- waiting tickets are filed into the lottery by lottery_file.lua, the caller's and then the
-- leader's, and until then nobody is admitted), a switch back to FIFO drops the lottery, and
-- either way SSE cursors are made unfollowable (left_count jumps past the kept leaves:
-- positions change order). Units sold are only ever changed by orders (token.lua).
-- The new version is the slug counter's next value.
-- Returns {'applied', document} or {'mismatch', document} (the document as HGETALL answers it).
local refused = refusal(room, generation)
if refused then
  return refused
end
if redis.call('HGET', room, 'ver') ~= expected then
  return {'mismatch', redis.call('HGETALL', room)}
end
redis.call('HSET', room, 'cfg', cfg)
local field = {}
for i = 1, ITEMS do
  item(i, field)
  local on = field.present == '1'
  if field.field == 'qmethod' then
    local was_random = redis.call('HGET', room, 'qmethod') == 'random'
    local random = on and field.value == 'random'
    if random and not was_random then
      redis.call('SET', lottery_filing, '1')
    elseif was_random and not random then
      redis.call('UNLINK', lottery, lottery_mac, lottery_filing)
    end
    if random ~= was_random then
      redis.call('INCRBY', left_count, 10001)
    end
  end
  if on then
    redis.call('HSET', room, field.field, field.value)
  elseif field.field ~= 'soldout' and field.field ~= 'sold' then
    redis.call('HDEL', room, field.field)
  end
end
if redis.call('HGET', room, 'stock') == '0' then
  redis.call('HSET', room, 'soldout', '1')
end
local version = redis.call('INCR', gen)
local last = tonumber(expected)
if version <= last then
  version = last + 1
  redis.call('SET', gen, string.format('%d', version))
end
redis.call('HSET', room, 'ver', string.format('%d', version))
return {'applied', redis.call('HGETALL', room)}
