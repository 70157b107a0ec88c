-- Change a room's settings in one step, optionally only at an expected version (If-Match).
-- KEYS[1] settings (HASH)   ARGV[1] expected version ("" = any)
-- ARGV[2..12] new rate, paused, ttl_ms, cap, checkout, share, abandon_ms, hold_ms, pow, pow_auto,
-- req_user: "-" = unchanged ("" for cap = no cap, for checkout = the demo checkout, for pow_auto =
-- a fixed difficulty)
-- ARGV[13..14] new opens_ms, preopens_ms (scheduled opening, Unix ms; "" = none, "-" = unchanged)
-- ARGV[15..19] the sale (docs/DESIGN.md "Stock and sold out"): stock ("" = unlimited), soldout
-- (1|0), closed (1|0), msg_en, msg_ko ("" = the page's own): "-" = unchanged. The sold-out mark
-- is never cleared, and a stock of 0 sets it; `sold` is only changed by orders (token.lua).
-- ARGV[20..23] the labels (issue 14): name_en, name_ko, wait_en, wait_ko: "-" = unchanged, else
-- "=" and the new value ("=" alone = none), so that a text "-" is a value like any other.
-- Returns {applied (1|0), rate, paused, ttl_ms, cap, checkout, share, abandon_ms, hold_ms, pow,
-- pow_auto, req_user, version, opens_ms, preopens_ms, stock, sold, soldout, closed, msg_en, msg_ko, name_en, name_ko, wait_en, wait_ko, qmethod}: the settings in force
-- afterwards.
-- ARGV[24] the queueing method (docs/DESIGN.md "Random queueing"): "fifo" | "random", "-" =
-- unchanged. A switch to random sets KEYS[4] lottery_filing: the waiting tickets are filed into
-- KEYS[2] lottery / KEYS[3] lottery_mac by lottery_file.lua (the caller, then the leader's tick,
-- which computes their keys), and until that is done nobody is admitted and positions stay in
-- arrival order. A switch back to FIFO deletes the lottery. Either way the SSE cursors are made
-- unfollowable (KEYS[5] left_count jumps past the kept leaves): positions change order.
-- KEYS[6] gone (the room's tombstone): a deleted room is not written ({-1}); nor is a room whose
-- settings are missing (a Redis that lost them: {-2}; the scheduler's lease writes them back).
-- ARGV[25] a create's last step ("" = an ordinary change): the room's first settings version
-- (Unix µs, above every version an earlier room of the slug had). The tombstone a create keeps
-- while it writes is then no reason to refuse: the version is set, the settings written, and
-- the tombstone removed in this one step, so nobody sees (nor joins) the room with only some of
-- its settings (found by a probe: a room created closed took a join between two steps).
-- ARGV[26] a restore ("" = none): a room whose settings the store lost (no tombstone), written
-- back whole by a replica as it held them, at this version (Unix µs, above every one held), in
-- one step: only if they are still missing (else nothing is written: another replica restored
-- them, or they were changed since). In two steps, a change made between them left the room
-- without the fields the change did not name (found by a probe).
local creating = ARGV[25] ~= nil and ARGV[25] ~= ''
local restoring = ARGV[26] ~= nil and ARGV[26] ~= ''
if not creating and redis.call('EXISTS', KEYS[6]) == 1 then
  return {-1}
end
local restored_already = false
if redis.call('EXISTS', KEYS[1]) == 0 then
  if not restoring then
    return {-2}
  end
  redis.call('HSET', KEYS[1], 'ver', ARGV[26])
elseif restoring then
  restored_already = true
end
if creating then
  redis.call('HSET', KEYS[1], 'ver', ARGV[25])
  redis.call('DEL', KEYS[6])
end
local version = tonumber(redis.call('HGET', KEYS[1], 'ver') or '0')
local applied = 0
if not restored_already and (ARGV[1] == '' or tonumber(ARGV[1]) == version) then
  local names = {'rate', 'paused', 'ttl_ms', 'cap', 'checkout', 'share', 'abandon_ms', 'hold_ms',
                 'pow', 'pow_auto', 'req_user', 'opens_ms', 'preopens_ms'}
  for i, name in ipairs(names) do
    if ARGV[i + 1] ~= '-' then
      redis.call('HSET', KEYS[1], name, ARGV[i + 1])
    end
  end
  local sale = {'stock', 'soldout', 'closed', 'msg_en', 'msg_ko'}
  for i, name in ipairs(sale) do
    local value = ARGV[i + 14]
    if value ~= '-' and not (name == 'soldout' and value == '0') then
      redis.call('HSET', KEYS[1], name, value)
    end
  end
  local labels = {'name_en', 'name_ko', 'wait_en', 'wait_ko'}
  for i, name in ipairs(labels) do
    if ARGV[i + 19] ~= '-' then
      redis.call('HSET', KEYS[1], name, string.sub(ARGV[i + 19], 2))
    end
  end
  if ARGV[24] ~= '-' then
    local was_random = redis.call('HGET', KEYS[1], 'qmethod') == 'random'
    local random = ARGV[24] == 'random'
    redis.call('HSET', KEYS[1], 'qmethod', ARGV[24])
    if random and not was_random then
      redis.call('SET', KEYS[4], '1')
    elseif was_random and not random then
      redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[4])
    end
    if random ~= was_random then
      redis.call('INCRBY', KEYS[5], 10001)
    end
  end
  if redis.call('HGET', KEYS[1], 'stock') == '0' then
    redis.call('HSET', KEYS[1], 'soldout', '1')
  end
  version = redis.call('HINCRBY', KEYS[1], 'ver', 1)
  applied = 1
end
local s = redis.call('HMGET', KEYS[1], 'rate', 'paused', 'ttl_ms', 'cap', 'checkout', 'share',
                     'abandon_ms', 'hold_ms', 'pow', 'pow_auto', 'req_user')
local reply = {applied, s[1] or '', s[2] or '', s[3] or '', s[4] or '', s[5] or '', s[6] or '',
               s[7] or '', s[8] or '', s[9] or '', s[10] or '', s[11] or '', version,
               redis.call('HGET', KEYS[1], 'opens_ms') or '',
               redis.call('HGET', KEYS[1], 'preopens_ms') or ''}
for _, v in ipairs(redis.call('HMGET', KEYS[1], 'stock', 'sold', 'soldout', 'closed', 'msg_en', 'msg_ko',
                                      'name_en', 'name_ko', 'wait_en', 'wait_ko', 'qmethod')) do
  table.insert(reply, v)
end
return reply
