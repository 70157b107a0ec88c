-- Take or renew a room's scheduler lease, and read the room's document in the same step.
-- KEYS: room leader epoch secret active pace
-- ARGV: generation holder lease_ms secret_offer
-- leader: STRING holder (PX lease); epoch: STRING counter, a new holder takes the next value.
-- secret_offer: the caller's copy of the room secret ("" = none), written back when the secret is
-- gone (a Redis restarted without persistence), so the room keeps the secret its replicas derive
-- ticket ids with. pace: the leader's measured pace, written by admit.lua.
-- Returns {epoch (0 = another holder leads), secret in force ("" = none), active users, pace
-- ("" = none), document (as HGETALL answers it)}.
local refused = refusal(room, generation)
if refused then
  return refused
end
local current = redis.call('GET', leader)
local taken = 0
if current == holder then
  redis.call('PEXPIRE', leader, lease_ms)
  taken = tonumber(redis.call('GET', epoch) or '0')
elseif not current then
  redis.call('SET', leader, holder, 'PX', lease_ms)
  taken = redis.call('INCR', epoch)
end
if secret_offer ~= '' then
  redis.call('SET', secret, secret_offer, 'NX')
end
return {taken, redis.call('GET', secret) or '', redis.call('ZCARD', active),
        redis.call('GET', pace) or '', redis.call('HGETALL', room)}
