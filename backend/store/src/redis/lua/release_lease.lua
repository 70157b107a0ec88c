-- Give up a room's scheduler lease if this holder has it (on shutdown), so another replica takes
-- over at once instead of waiting for the lease to run out.
-- KEYS: leader
-- ARGV: holder
-- Returns 1.
if redis.call('GET', leader) == holder then
  redis.call('DEL', leader)
end
return 1
