-- Write a room's default settings unless some replica already did, and return those in force.
-- KEYS[1] settings (HASH)   ARGV[1] rate   ARGV[2] paused   ARGV[3] ttl_ms   ARGV[4] cap ("" = none)
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'rate', ARGV[1], 'paused', ARGV[2], 'ttl_ms', ARGV[3], 'cap', ARGV[4])
end
return redis.call('HMGET', KEYS[1], 'rate', 'paused', 'ttl_ms', 'cap')
