-- Check an entry token and, for an order, use it in the same step (a token works once).
-- KEYS: room active
-- ARGV: generation token now_ms consume keep_ms prefix order_key receipt
-- active: ZSET id -> token expiry ms. token: "room.secret". consume: 1 = an order uses it.
-- order_key: the order's Idempotency-Key ("" = none); receipt: the order's receipt (JSON text),
-- kept with the ticket for retries of the same order.
-- A consume takes one unit of the document's `stock` (absent = unlimited) and adds one to `sold`
-- in the same step; the last unit sets `soldout`. With no unit left the verdict is SOLD_OUT and
-- the token stays live.
-- Returns {verdict, ticket id, receipt}: verdict is VALID, REPLAY (a consume retried with the key
-- that used the token: the receipt kept then), UNKNOWN, EXPIRED, USED or SOLD_OUT.
local refused = refusal(room, generation)
if refused then
  return refused
end
local token_secret = string.match(token, '([^.]+)$')
local id = redis.call('GET', prefix .. 'token:' .. token_secret)
if not id then
  return {'UNKNOWN', '', ''}
end
local key = prefix .. 'ticket:' .. id
local ticket = redis.call('HMGET', key, 'state', 'tok', 'exp', 'okey', 'receipt')
if not ticket[1] or ticket[2] ~= token then
  return {'UNKNOWN', '', ''}
end
if ticket[1] == 'COMPLETED' then
  if consume == '1' and order_key ~= '' and ticket[4] == order_key then
    -- A write, so that the WAIT after a replay covers the use it replays (WAIT counts this
    -- connection's writes), and the receipt is kept for keep_ms from the last retry.
    redis.call('PEXPIRE', key, keep_ms)
    return {'REPLAY', id, ticket[5] or ''}
  end
  return {'USED', id, ''}
end
if ticket[1] == 'LEFT' then
  return {'USED', id, ''}
end
if ticket[1] == 'EXPIRED' or tonumber(ticket[3]) <= tonumber(now_ms) then
  return {'EXPIRED', id, ''}
end
if consume == '1' then
  local stock = redis.call('HGET', room, 'stock')
  if stock then
    local left = tonumber(stock)
    if left <= 0 then
      return {'SOLD_OUT', id, ''}
    end
    redis.call('HSET', room, 'stock', string.format('%d', left - 1))
    if left == 1 then
      redis.call('HSET', room, 'soldout', '1')
    end
  end
  redis.call('HINCRBY', room, 'sold', 1)
  redis.call('HSET', key, 'state', 'COMPLETED', 'okey', order_key, 'receipt', receipt)
  redis.call('PEXPIRE', key, keep_ms)
  redis.call('ZREM', active, id)
end
return {'VALID', id, ''}
