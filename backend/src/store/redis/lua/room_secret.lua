-- The room secret (the key of the HMAC that derives a keyed join's ticket id), shared by every
-- replica: the caller's fresh offer is written if none is there (SET NX), the dedup hash's TTL is
-- renewed while keyed joins go on, and the secret in force is read back, in one step.
-- KEYS[1] secret   KEYS[2] dedup   KEYS[3] gone (the room's tombstone)
-- ARGV[1] the offer   ARGV[2] dedup hash TTL in seconds
-- Returns the secret, or false (nil) when the room was deleted: nothing is written then (its
-- keys are being purged, and a secret written behind the purge's SCAN would outlive it).
if redis.call('EXISTS', KEYS[3]) == 1 then
  return false
end
redis.call('SET', KEYS[1], ARGV[1], 'NX')
redis.call('EXPIRE', KEYS[2], ARGV[2])
return redis.call('GET', KEYS[1])
