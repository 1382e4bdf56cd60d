-- sluice redisstore: single decisions, one per key, each on its own
-- (admitted or refused regardless of the others), in order, at one time.
-- Follows fixed.lua and bucket.lua (fast.go joins the three). A Take sends
-- one; concurrent Takes on one connection are gathered into one call.
-- KEYS: the state hashes. ARGV: now seconds and nanoseconds ('' for Redis
-- TIME), slack ms, then groups of requests with the same arguments, each:
-- kind, n, the kind's arguments, for the next n KEYS:
--   'f', n, cost, limit, period µs (fixed_group);
--   'b', n, and bucket_group's five.
-- Returns {now s, now ns, then one value per key} (fixed and bucket).
local ns, nl
if ARGV[1] == '' then
  local t = redis.call('TIME')
  ns, nl = tonumber(t[1]), t[2] * 1000
else
  ns, nl = tonumber(ARGV[1]), tonumber(ARGV[2])
end
local slack = tonumber(ARGV[3])
local out, i, k = {ns, nl}, 4, 0
while k < #KEYS do
  local n = tonumber(ARGV[i + 1])
  if ARGV[i] == 'f' then
    local g = fixed_group(ns, nl, ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], slack)
    for j = k + 1, k + n do out[j + 2] = fixed(KEYS[j], g) end
    i = i + 5
  else
    local g = bucket_group(ns, nl, i + 2, slack)
    for j = k + 1, k + n do out[j + 2] = bucket(KEYS[j], g) end
    i = i + 7
  end
  k = k + n
end
return out
