-- One leader tick: check the lease holder and epoch (fencing), renew the lease, expire overdue
-- tokens, then pop shoppers in arrival order and issue their entry tokens, all atomically.
-- KEYS[1] queue   KEYS[2] active (ZSET id -> token expiry ms)   KEYS[3] leader   KEYS[4] epoch
-- KEYS[5] settings   KEYS[6] popped (STRING: shoppers ever admitted, for SSE hubs)
-- ARGV[1] holder   ARGV[2] epoch   ARGV[3] now ms   ARGV[4] token TTL ms   ARGV[5] keep ms
-- ARGV[6] cap on active users (-1 = none)   ARGV[7] key prefix   ARGV[8] lease ms
-- KEYS[7] bank (STRING: instant admissions left for join.lua)   KEYS[8] pace (STRING, the
-- leader's measured pace for every replica's ETAs)
-- ARGV[9] most instant admissions to bank   ARGV[10] pace text ("" = leave as is)
-- ARGV[11..] tokens "room.secret"
-- Returns {admitted (-1 = fenced), expired, waiting, active, rate, paused, ttl_ms, cap, version,
-- shoppers ever admitted}: the settings are those in force now, for the next tick's quota. A room
-- paused in the store admits nobody, whatever the caller's (possibly older) copy of the settings
-- says. What the quota leaves unused with nobody waiting is banked for instant joins, so every
-- admission, tick or join, spends some tick's quota exactly once.
if redis.call('GET', KEYS[3]) ~= ARGV[1] or redis.call('GET', KEYS[4]) ~= ARGV[2] then
  return {-1, 0, 0, 0, '', '', '', '', '', 0}
end
redis.call('PEXPIRE', KEYS[3], ARGV[8])
local now = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local keep = ttl + tonumber(ARGV[5])
local prefix = ARGV[7]

local overdue = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
local expired = 0
for _, id in ipairs(overdue) do
  local key = prefix .. 'ticket:' .. id
  if redis.call('HGET', key, 'state') == 'TOKEN_ISSUED' then
    redis.call('HSET', key, 'state', 'EXPIRED')
    expired = expired + 1
  end
end
if #overdue > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
end

local active = redis.call('ZCARD', KEYS[2])
local s = redis.call('HMGET', KEYS[5], 'rate', 'paused', 'ttl_ms', 'cap', 'ver')
local granted = #ARGV - 10
local quota = granted
if s[2] == '1' then
  quota = 0
end
local cap = tonumber(ARGV[6])
if cap >= 0 then
  quota = math.min(quota, math.max(0, cap - active))
end
local admitted = 0
if quota > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[1], quota)
  local expires_at = now + ttl
  for i = 1, #popped, 2 do
    local id = popped[i]
    admitted = admitted + 1
    local token = ARGV[10 + admitted]
    local secret = string.match(token, '([^.]+)$')
    local key = prefix .. 'ticket:' .. id
    redis.call('HSET', key, 'state', 'TOKEN_ISSUED', 'tok', token, 'exp', expires_at)
    redis.call('PEXPIRE', key, keep)
    redis.call('SET', prefix .. 'token:' .. secret, id, 'PX', keep)
    redis.call('ZADD', KEYS[2], expires_at, id)
  end
end
if admitted > 0 then
  redis.call('INCRBY', KEYS[6], admitted)
end
local waiting = redis.call('ZCARD', KEYS[1])
local bank = 0
if waiting == 0 and s[2] ~= '1' then
  bank = math.min(tonumber(ARGV[9]),
                  tonumber(redis.call('GET', KEYS[7]) or '0') + granted - admitted)
end
redis.call('SET', KEYS[7], bank, 'PX', ARGV[8])
if ARGV[10] ~= '' then
  redis.call('SET', KEYS[8], ARGV[10], 'PX', 10000)
end
return {admitted, expired, waiting, active + admitted,
        s[1] or '', s[2] or '', s[3] or '', s[4] or '', s[5] or '0',
        tonumber(redis.call('GET', KEYS[6]) or '0')}
