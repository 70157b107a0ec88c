-- Check an entry token and, for an order, use it in the same step (a token works once).
-- KEYS[1] active (ZSET)   ARGV[1] token "room.secret"   ARGV[2] now ms   ARGV[3] consume (0|1)
-- ARGV[4] keep ms   ARGV[5] key prefix   ARGV[6] the order's Idempotency-Key ("" = none)
-- ARGV[7] the order's receipt (JSON text), kept with the ticket for retries of the same order
-- Returns {verdict, ticket id, receipt}: verdict is VALID, REPLAY (a consume retried with the key
-- that used the token: the receipt kept then), UNKNOWN, EXPIRED or USED.
local prefix = ARGV[5]
local secret = string.match(ARGV[1], '([^.]+)$')
local id = redis.call('GET', prefix .. 'token:' .. secret)
if not id then
  return {'UNKNOWN', '', ''}
end
local key = prefix .. 'ticket:' .. id
local ticket = redis.call('HMGET', key, 'state', 'tok', 'exp', 'okey', 'receipt')
if not ticket[1] or ticket[2] ~= ARGV[1] then
  return {'UNKNOWN', '', ''}
end
if ticket[1] == 'COMPLETED' then
  if ARGV[3] == '1' and ARGV[6] ~= '' and ticket[4] == ARGV[6] then
    return {'REPLAY', id, ticket[5] or ''}
  end
  return {'USED', id, ''}
end
if ticket[1] == 'LEFT' then
  return {'USED', id, ''}
end
if ticket[1] == 'EXPIRED' or tonumber(ticket[3]) <= tonumber(ARGV[2]) then
  return {'EXPIRED', id, ''}
end
if ARGV[3] == '1' then
  redis.call('HSET', key, 'state', 'COMPLETED', 'okey', ARGV[6], 'receipt', ARGV[7])
  redis.call('PEXPIRE', key, ARGV[4])
  redis.call('ZREM', KEYS[1], id)
end
return {'VALID', id, ''}
