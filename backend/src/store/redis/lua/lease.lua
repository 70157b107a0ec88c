-- Take or renew a room's scheduler lease, and read the room's settings in the same step.
-- KEYS[1] leader (STRING holder, PX lease)   KEYS[2] epoch (STRING counter)   KEYS[3] settings (HASH)
-- KEYS[4] secret (STRING: HMAC key of derived ticket ids)   KEYS[5] active (ZSET: tokens out)
-- KEYS[6] pace (STRING: the leader's measured pace, written by admit.lua)
-- ARGV[1] holder   ARGV[2] lease in ms
-- ARGV[3] the caller's cached room secret ("" = none): written back when the secret is gone (a
-- Redis restarted without persistence), so the room keeps the secret its replicas derive ticket
-- ids with.
-- Returns {epoch (0 = another holder leads), rate, paused, ttl_ms, cap, checkout, share,
-- abandon_ms, hold_ms, pow, pow_auto, req_user, settings version, secret in force ("" = none), active users, pace ("" =
-- none), opens_ms, preopens_ms ("" = none), stock, sold, soldout, closed, msg_en, msg_ko (the
-- sale's fields: absent = nil)}.
-- KEYS[7] gone (STRING: the room's tombstone, written by a deletion before its keys go): a deleted
-- room is neither led nor written back; the reply is {-1}.
if redis.call('EXISTS', KEYS[7]) == 1 then
  return {-1}
end
local current = redis.call('GET', KEYS[1])
local epoch = 0
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  epoch = tonumber(redis.call('GET', KEYS[2]) or '0')
elseif not current then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  epoch = redis.call('INCR', KEYS[2])
end
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[4], ARGV[3], 'NX')
end
-- Settings missing without a tombstone: the store lost them (a Redis restarted without
-- persistence). Not written back here: the caller writes back every field its runtime holds
-- (`Store::restore_room`), once; a lease that wrote the base ones from its arguments had the
-- replicas take those, and lose the rest (found by a probe). The reply is {-2}.
if redis.call('EXISTS', KEYS[3]) == 0 then
  return {-2}
end
local s = redis.call('HMGET', KEYS[3], 'rate', 'paused', 'ttl_ms', 'cap', 'checkout', 'share',
                     'abandon_ms', 'hold_ms', 'pow', 'pow_auto', 'req_user', 'ver')
local reply = {epoch, s[1] or '', s[2] or '', s[3] or '', s[4] or '', s[5] or '', s[6] or '',
               s[7] or '', s[8] or '', s[9] or '', s[10] or '', s[11] or '', s[12] or '0',
               redis.call('GET', KEYS[4]) or '',
               redis.call('ZCARD', KEYS[5]),
               redis.call('GET', KEYS[6]) or '',
               redis.call('HGET', KEYS[3], 'opens_ms') or '',
               redis.call('HGET', KEYS[3], 'preopens_ms') or ''}
for _, v in ipairs(redis.call('HMGET', KEYS[3], 'stock', 'sold', 'soldout', 'closed', 'msg_en', 'msg_ko',
                                      'name_en', 'name_ko', 'wait_en', 'wait_ko', 'qmethod')) do
  table.insert(reply, v)
end
return reply
