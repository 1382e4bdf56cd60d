-- sluice redisstore: single decisions, one per key, each on its own
-- (admitted or refused regardless of the others), in order, at one time.
-- Follows fixed.lua and bucket.lua (fast.go joins the three). A Take sends
-- one; concurrent Takes on one connection are gathered into one call.
-- KEYS: the state hashes. ARGV: now seconds and nanoseconds ('' for Redis
-- TIME), slack ms, then per key its kind and arguments: 'f', cost, limit,
-- period µs (fixed.lua); or 'b' and bucket.lua's six.
-- Returns {now s, now ns, then per key: admitted 1/0 or '?', and the two
-- state fields it read}.
local ns, nl
if ARGV[1] == '' then
  local t = redis.call('TIME')
  ns, nl = tonumber(t[1]), t[2] * 1000
else
  ns, nl = tonumber(ARGV[1]), tonumber(ARGV[2])
end
local slack = tonumber(ARGV[3])
local out, i, o = {ns, nl}, 4, 2
for k = 1, #KEYS do
  local ok, a, b
  if ARGV[i] == 'f' then
    ok, a, b = fixed(KEYS[k], ns * 1000000 + math.floor(nl / 1000), ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], slack)
    i = i + 4
  else
    ok, a, b = bucket(KEYS[k], ns, nl, i, slack)
    i = i + 7
  end
  out[o + 1], out[o + 2], out[o + 3] = ok, a, b
  o = o + 3
end
return out
