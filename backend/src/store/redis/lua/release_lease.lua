-- Give up a room's scheduler lease if this holder has it (on shutdown), so another replica takes
-- over at once instead of waiting for the lease to run out.
-- KEYS[1] leader (STRING holder)   ARGV[1] holder
-- Returns 1.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 1
