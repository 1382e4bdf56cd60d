-- sluice redisstore: give back units of a lease (see sluice.Model.Give).
--
-- KEYS[1]: the state hash.
-- Bucket kinds, ARGV: "b", the stamp's TAT and fraction, the denominator,
--   then the TAT, fraction and expiry to write: only if the key still holds
--   exactly the stamp (nothing else changed it since the lease's take).
-- Fixed window, ARGV: "f", the stamp's window start, units: the count goes
--   down by units if the key is still in that window and holds at least
--   units (counts beyond 15 digits, which doubles may not hold exactly, are
--   left alone).
-- Returns 1 if it gave back, else 0. The key's TTL is left as it was: it
-- can only be later than needed, never earlier.
local key = KEYS[1]
if ARGV[1] == "b" then
  local v = redis.call('HMGET', key, 't', 'f', 'd')
  if v[1] ~= ARGV[2] or (v[2] or "0") ~= ARGV[3] or v[3] ~= ARGV[4] then return 0 end
  redis.call('HSET', key, 't', ARGV[5], 'f', ARGV[6], 'x', ARGV[7])
  return 1
end
local v = redis.call('HMGET', key, 't', 'c')
if v[1] ~= ARGV[2] or not v[2] or #v[2] > 15 then return 0 end
local c, u = tonumber(v[2]), tonumber(ARGV[3])
if c < u then return 0 end
redis.call('HSET', key, 'c', string.format("%d", c - u))
return 1
