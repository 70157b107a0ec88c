-- Check an entry token and, for an order, use it in the same step (a token works once).
-- KEYS[1] active (ZSET)   ARGV[1] token "room.secret"   ARGV[2] now ms   ARGV[3] consume (0|1)
-- ARGV[4] keep ms   ARGV[5] key prefix   ARGV[6] the order's Idempotency-Key ("" = none)
-- ARGV[7] the order's receipt (JSON text), kept with the ticket for retries of the same order
-- KEYS[2] settings (HASH): a consume takes one unit of `stock` ("" or absent = unlimited) and adds
-- one to `sold` in the same step; the last unit sets `soldout`. With no unit left the verdict is
-- SOLD_OUT and the token stays live.
-- Returns {verdict, ticket id, receipt}: verdict is VALID, REPLAY (a consume retried with the key
-- that used the token: the receipt kept then), UNKNOWN, EXPIRED, USED or SOLD_OUT.
-- KEYS[3] gone (the room's tombstone): a deleted room's tokens are UNKNOWN, and nothing of it is
-- written (a consume's ticket or stock written behind the purge's SCAN would outlive it).
if redis.call('EXISTS', KEYS[3]) == 1 then
  return {'UNKNOWN', '', ''}
end
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
  local stock = redis.call('HGET', KEYS[2], 'stock')
  if stock and stock ~= '' then
    local left = tonumber(stock)
    if left <= 0 then
      return {'SOLD_OUT', id, ''}
    end
    redis.call('HSET', KEYS[2], 'stock', left - 1)
    if left == 1 then
      redis.call('HSET', KEYS[2], 'soldout', '1')
    end
  end
  redis.call('HINCRBY', KEYS[2], 'sold', 1)
  redis.call('HSET', key, 'state', 'COMPLETED', 'okey', ARGV[6], 'receipt', ARGV[7])
  redis.call('PEXPIRE', key, ARGV[4])
  redis.call('ZREM', KEYS[1], id)
end
return {'VALID', id, ''}
