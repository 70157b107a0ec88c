-- Read many tickets at once (SSE fan-out): one command however many streams are open.
-- KEYS[1] queue   ARGV[1] key prefix   ARGV[2..] ticket ids
-- Returns a flat list, 4 entries per id: {rank+1 or 0, state or "", token or "", expiry or ""}.
local out = {}
for i = 2, #ARGV do
  local rank = redis.call('ZRANK', KEYS[1], ARGV[i])
  if rank then
    out[#out + 1] = rank + 1
    out[#out + 1] = ''
    out[#out + 1] = ''
    out[#out + 1] = ''
  else
    local t = redis.call('HMGET', ARGV[1] .. 'ticket:' .. ARGV[i], 'state', 'tok', 'exp')
    out[#out + 1] = 0
    out[#out + 1] = t[1] or ''
    out[#out + 1] = t[2] or ''
    out[#out + 1] = t[3] or ''
  end
end
return out
