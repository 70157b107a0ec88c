-- The catalog's changes, each in one step as every replica reads the catalog. A replica reads the
-- list, then the deleted marks, then the incarnations (`room::registry`); written in separate
-- commands, a change could be seen half done (a creation listed but still marked deleted, or no
-- longer marked but still under the deleted room's incarnation) and a room taken for one Redis
-- lost, or a deleted room for one created again.
-- KEYS[1] rooms (SET)   KEYS[2] deleted (HASH: slug -> Unix ms)   KEYS[3] incarnations (HASH)
-- ARGV[1] the slug   ARGV[2] an incarnation id   ARGV[3] the mode   ARGV[4] now, Unix ms (undo)
-- Modes:
--   'create': only a slug not listed is registered: listed, unmarked, under ARGV[2].
--   'ensure': the slug is listed (a seeded room, or one the store lost) and unmarked, and keeps
--             the incarnation it has (else ARGV[2]).
--   'delete': the slug leaves the list and its incarnation goes with it (its mark, written
--             before, stays): a room missing from the list under another incarnation is then
--             always one created again, never one deleted twice.
--   'undo':   a creation that failed after registering is taken back, if the slug is still
--             under its incarnation ARGV[2]: unlisted, marked deleted at ARGV[4], no incarnation.
-- Returns 1 when the slug was added (create, ensure), removed (delete) or taken back (undo), else 0.
local mode = ARGV[3]
if mode == 'create' then
  local added = redis.call('SADD', KEYS[1], ARGV[1])
  if added == 1 then
    redis.call('HDEL', KEYS[2], ARGV[1])
    redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
  end
  return added
elseif mode == 'ensure' then
  local added = redis.call('SADD', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2])
  return added
elseif mode == 'delete' then
  local removed = redis.call('SREM', KEYS[1], ARGV[1])
  if removed == 1 then
    redis.call('HDEL', KEYS[3], ARGV[1])
  end
  return removed
elseif mode == 'undo' then
  if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then
    return 0
  end
  redis.call('SREM', KEYS[1], ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
  redis.call('HDEL', KEYS[3], ARGV[1])
  return 1
end
return redis.error_reply('catalog.lua: unknown mode ' .. tostring(mode))
