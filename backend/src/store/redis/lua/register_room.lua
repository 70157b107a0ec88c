-- Lists a room in the catalog in one step, as every replica reads it. A replica reads the list,
-- then the deleted marks, then the incarnations (`room::registry`); written in separate commands,
-- a creation could be seen half done (listed but still marked deleted, or no longer marked but
-- still under the deleted room's incarnation) and the room taken for one Redis lost.
-- KEYS[1] rooms (SET)   KEYS[2] deleted (HASH)   KEYS[3] incarnations (HASH)
-- ARGV[1] the slug   ARGV[2] a fresh incarnation id
-- ARGV[3] 'create': only a slug not listed is registered, under the fresh incarnation;
--         'ensure': the slug is listed (a seeded room, or one the store lost) and keeps the
--         incarnation it has, if any.
-- Returns 1 when the slug was added, 0 when it was listed already.
local added = redis.call('SADD', KEYS[1], ARGV[1])
if ARGV[3] == 'create' then
  if added == 1 then
    redis.call('HDEL', KEYS[2], ARGV[1])
    redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
  end
else
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2])
end
return added
