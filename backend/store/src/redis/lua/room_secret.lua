-- The room secret (the key of the HMAC that derives a keyed join's ticket id), shared by every
-- replica: the caller's fresh offer is written if none is there (SET NX), the dedup hash's TTL is
-- renewed while keyed joins go on, and the secret in force is read back, in one step.
-- KEYS: room secret dedup
-- ARGV: generation offer dedup_ttl
-- Returns the secret.
local refused = refusal(room, generation)
if refused then
  return refused
end
redis.call('SET', secret, offer, 'NX')
redis.call('EXPIRE', dedup, dedup_ttl)
return redis.call('GET', secret)
