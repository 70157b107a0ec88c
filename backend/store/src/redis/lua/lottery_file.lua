-- File waiting tickets into a random room's lottery (docs/DESIGN.md "Random queueing"): one
-- batch of a switch to random, whose keys the caller computed from the seed (Lua has no HMAC).
-- KEYS: room queue lottery lottery_mac lottery_filing prequeue
-- ARGV: generation last
-- EACH: id member
-- lottery: ZSET, scores 0; lottery_mac: HASH id -> member; member: `hex(HMAC-SHA256(seed, tag))
-- .. tag .. id`. last: "1" = the caller's scan of the queue ends with this batch.
-- A ticket is filed only if it still waits (not in the pre-queue) and is not filed yet; a ticket
-- that left meanwhile is skipped, one that joined meanwhile filed itself (join.lua). After the
-- last batch lottery_filing is deleted if the lottery holds every waiting ticket; else it stays
-- (a skipped ticket came back unfiled behind the scan) and the leader's next tick files again.
-- Returns {'filed', filed, done (1|0)}, or {'not_random'} when the room is not random any more.
local refused = refusal(room, generation)
if refused then
  return refused
end
if redis.call('HGET', room, 'qmethod') ~= 'random' then
  return {'not_random'}
end
local filed = 0
local ticket = {}
for i = 1, ITEMS do
  item(i, ticket)
  if redis.call('ZSCORE', queue, ticket.id) and redis.call('HEXISTS', lottery_mac, ticket.id) == 0
      and redis.call('SISMEMBER', prequeue, ticket.id) == 0 then
    redis.call('ZADD', lottery, 0, ticket.member)
    redis.call('HSET', lottery_mac, ticket.id, ticket.member)
    filed = filed + 1
  end
end
local done = 0
if last == '1' and redis.call('ZCARD', queue) - redis.call('SCARD', prequeue) == redis.call('ZCARD', lottery) then
  redis.call('DEL', lottery_filing)
  done = 1
end
return {'filed', filed, done}
