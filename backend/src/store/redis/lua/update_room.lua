-- Change a room's settings in one step, optionally only at an expected version (If-Match).
-- KEYS[1] settings (HASH)   ARGV[1] expected version ("" = any)
-- ARGV[2..12] new rate, paused, ttl_ms, cap, checkout, share, abandon_ms, hold_ms, pow, pow_auto,
-- req_user: "-" = unchanged
-- ("" for cap = no cap, for checkout = the demo checkout)
-- Returns {applied (1|0), rate, paused, ttl_ms, cap, checkout, share, abandon_ms, hold_ms, pow,
-- pow_auto, req_user, version}:
-- the settings in force afterwards.
local version = tonumber(redis.call('HGET', KEYS[1], 'ver') or '0')
local applied = 0
if ARGV[1] == '' or tonumber(ARGV[1]) == version then
  local names = {'rate', 'paused', 'ttl_ms', 'cap', 'checkout', 'share', 'abandon_ms', 'hold_ms', 'pow',
                 'pow_auto', 'req_user'}
  for i, name in ipairs(names) do
    if ARGV[i + 1] ~= '-' then
      redis.call('HSET', KEYS[1], name, ARGV[i + 1])
    end
  end
  version = redis.call('HINCRBY', KEYS[1], 'ver', 1)
  applied = 1
end
local s = redis.call('HMGET', KEYS[1], 'rate', 'paused', 'ttl_ms', 'cap', 'checkout', 'share',
                     'abandon_ms', 'hold_ms', 'pow', 'pow_auto', 'req_user')
return {applied, s[1] or '', s[2] or '', s[3] or '', s[4] or '', s[5] or '', s[6] or '', s[7] or '',
        s[8] or '', s[9] or '', s[10] or '', s[11] or '', version}
