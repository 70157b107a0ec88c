-- A room deleted: its document marked deleted in one step, unless shoppers wait or hold unused
-- entry tokens and the deletion is not forced. The generation's keys are purged afterwards by the
-- caller: once the document says deleted, every script refuses to write them.
-- KEYS: room queue active
-- ARGV: generation force now_ms
-- Returns {'deleted', waiting, tokens out} or {'not_empty', waiting, tokens out}.
local refused = refusal(room, generation)
if refused then
  return refused
end
local waiting = redis.call('ZCARD', queue)
local tokens_out = redis.call('ZCOUNT', active, '(' .. now_ms, '+inf')
if force ~= '1' and (waiting > 0 or tokens_out > 0) then
  return {'not_empty', waiting, tokens_out}
end
local version = redis.call('HGET', room, 'ver')
redis.call('DEL', room)
redis.call('HSET', room, 'gen', generation, 'ver', version, 'state', 'deleted', 'deleted_ms', now_ms)
return {'deleted', waiting, tokens_out}
