-- Write a room's default settings and its secret unless some replica already did, and return those
-- in force.
-- KEYS[1] settings (HASH)   KEYS[2] secret (STRING: HMAC key of derived ticket ids)
-- ARGV[1] rate   ARGV[2] paused   ARGV[3] ttl_ms   ARGV[4] cap ("" = none)
-- ARGV[5] checkout URL ("" = the demo checkout)   ARGV[6] share token with embedder (1|0)
-- ARGV[7] abandon_ms   ARGV[8] hold_ms
-- ARGV[9] a fresh random secret (32 bytes), written only if the room has none
-- ARGV[10] pow (proof-of-work bits)   ARGV[11] pow_auto (joins/s, "" = fixed)   ARGV[12] req_user (1|0)
-- Returns {rate, paused, ttl_ms, cap, checkout, share, abandon_ms, hold_ms, pow, pow_auto, req_user,
-- settings version, secret,
-- opens_ms, preopens_ms ("" = none: a new room has no scheduled opening), stock, sold, soldout,
-- closed, msg_en, msg_ko, name_en, name_ko, wait_en, wait_ko, qmethod} (the sale's fields: absent = nil).
-- KEYS[3] gone (the room's tombstone): an init makes the room live again (`--rooms` seeding a
-- room deleted earlier), so the tombstone goes, and the revived room's versions start at ARGV[13]
-- (the time in Unix µs, as a created room's: above every version the deleted room had).
-- ARGV[14] "1" = a create's step: the tombstone stays (`update_room.lua` removes it with the
-- create's last step, which also sets the version).
local revived = false
if ARGV[14] ~= '1' then
  revived = redis.call('DEL', KEYS[3]) == 1
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'rate', ARGV[1], 'paused', ARGV[2], 'ttl_ms', ARGV[3], 'cap', ARGV[4],
             'checkout', ARGV[5], 'share', ARGV[6], 'abandon_ms', ARGV[7], 'hold_ms', ARGV[8],
             'pow', ARGV[10], 'pow_auto', ARGV[11], 'req_user', ARGV[12])
  if revived then
    redis.call('HSET', KEYS[1], 'ver', ARGV[13])
  end
end
redis.call('SET', KEYS[2], ARGV[9], 'NX')
local s = redis.call('HMGET', KEYS[1], 'rate', 'paused', 'ttl_ms', 'cap', 'checkout', 'share',
                     'abandon_ms', 'hold_ms', 'pow', 'pow_auto', 'req_user', 'ver')
local reply = {s[1] or '', s[2] or '', s[3] or '', s[4] or '', s[5] or '', s[6] or '', s[7] or '',
               s[8] or '', s[9] or '', s[10] or '', s[11] or '', s[12] or '0',
               redis.call('GET', KEYS[2]),
               redis.call('HGET', KEYS[1], 'opens_ms') or '',
               redis.call('HGET', KEYS[1], 'preopens_ms') or ''}
for _, v in ipairs(redis.call('HMGET', KEYS[1], 'stock', 'sold', 'soldout', 'closed', 'msg_en', 'msg_ko',
                                      'name_en', 'name_ko', 'wait_en', 'wait_ko', 'qmethod')) do
  table.insert(reply, v)
end
return reply
