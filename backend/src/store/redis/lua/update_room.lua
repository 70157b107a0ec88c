-- Change a room's settings in one step, optionally only at an expected version (If-Match).
-- KEYS[1] settings (HASH)   ARGV[1] expected version ("" = any)
-- ARGV[2..9] new rate, paused, ttl_ms, cap, checkout, share, abandon_ms, hold_ms: "-" = unchanged
-- ("" for cap = no cap, for checkout = the demo checkout)
-- ARGV[10..11] new opens_ms, preopens_ms (scheduled opening, Unix ms; "" = none, "-" = unchanged)
-- Returns {applied (1|0), rate, paused, ttl_ms, cap, checkout, share, abandon_ms, hold_ms, version,
-- opens_ms, preopens_ms}: the settings in force afterwards.
local version = tonumber(redis.call('HGET', KEYS[1], 'ver') or '0')
local applied = 0
if ARGV[1] == '' or tonumber(ARGV[1]) == version then
  local names = {'rate', 'paused', 'ttl_ms', 'cap', 'checkout', 'share', 'abandon_ms', 'hold_ms',
                 'opens_ms', 'preopens_ms'}
  for i, name in ipairs(names) do
    if ARGV[i + 1] ~= '-' then
      redis.call('HSET', KEYS[1], name, ARGV[i + 1])
    end
  end
  version = redis.call('HINCRBY', KEYS[1], 'ver', 1)
  applied = 1
end
local s = redis.call('HMGET', KEYS[1], 'rate', 'paused', 'ttl_ms', 'cap', 'checkout', 'share',
                     'abandon_ms', 'hold_ms')
return {applied, s[1] or '', s[2] or '', s[3] or '', s[4] or '', s[5] or '', s[6] or '', s[7] or '',
        s[8] or '', version,
        redis.call('HGET', KEYS[1], 'opens_ms') or '', redis.call('HGET', KEYS[1], 'preopens_ms') or ''}
