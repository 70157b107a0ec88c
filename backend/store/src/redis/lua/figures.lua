-- A replica's figures shared, every live replica's read, and the sale's totals, in one step.
-- KEYS: room figures figure_totals queue seq popped
-- ARGV: generation prefix replica record expired now_ms ttl_ms
-- figures: HASH replica -> '<expiry ms> <record>'. figure_totals: HASH expired, peak_waiting,
-- longest_wait_secs, sold_out_at_ms. record '' reads only (nothing written but the peaks).
-- Returns {joined, admitted, expired, peak_waiting, longest_wait_secs, sold_out_at_ms
-- (0 = not sold out), record, record, …}: the live records ordered by replica.
local refused = refusal(room, generation)
if refused then
  return refused
end
local now = tonumber(now_ms)
if record ~= '' then
  redis.call('HSET', figures, replica, (now + tonumber(ttl_ms)) .. ' ' .. record)
  -- The hash goes with its last writer: a room nobody serves keeps no records.
  redis.call('PEXPIRE', figures, tonumber(ttl_ms))
end
if tonumber(expired) > 0 then
  redis.call('HINCRBY', figure_totals, 'expired', expired)
end
-- The peaks, as this step sees the line and its front (a sold-out room's line is empty).
local waiting = redis.call('ZCARD', queue)
local old = redis.call('HMGET', figure_totals, 'peak_waiting', 'longest_wait_secs', 'sold_out_at_ms')
local peak = math.max(tonumber(old[1] or '0'), waiting)
local longest = tonumber(old[2] or '0')
local front = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
if front[2] then
  local seq = tonumber(front[2])
  local born = redis.call('BITFIELD', prefix .. 'born:' .. math.floor(seq / 65536), 'GET', 'u32',
    '#' .. (seq % 65536))[1]
  if born and born > 0 then
    longest = math.max(longest, math.floor(now / 1000) - born)
  end
end
local sold_out_at = tonumber(old[3] or '0')
if sold_out_at == 0 and redis.call('HGET', room, 'soldout') == '1' then
  sold_out_at = now
end
redis.call('HSET', figure_totals, 'peak_waiting', peak, 'longest_wait_secs', longest,
  'sold_out_at_ms', sold_out_at)
local reply = {
  tonumber(redis.call('GET', seq) or '0'),
  tonumber(redis.call('GET', popped) or '0'),
  tonumber(redis.call('HGET', figure_totals, 'expired') or '0'),
  peak, longest, sold_out_at,
}
local all = redis.call('HGETALL', figures)
local live = {}
for i = 1, #all, 2 do
  local space = string.find(all[i + 1], ' ', 1, true)
  if space and tonumber(string.sub(all[i + 1], 1, space - 1)) > now then
    table.insert(live, {all[i], string.sub(all[i + 1], space + 1)})
  else
    redis.call('HDEL', figures, all[i])
  end
end
table.sort(live, function(a, b) return a[1] < b[1] end)
for _, entry in ipairs(live) do
  table.insert(reply, entry[2])
end
return reply
