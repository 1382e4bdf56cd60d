-- sluice redisstore: give back units of a lease (see sluice.Model.Give).
-- Follows big.lua, pairs.lua and take_bucket.lua (give.go joins them).
--
-- KEYS[1]: the state hash.
-- Bucket kinds, ARGV: "b", the stamp's TAT and fraction, the denominator,
--   then the TAT and fraction to write (in the stored epoch's field, or an
--   earlier one of the same H: take_bucket.lua): only if the key still
--   holds exactly the stamp
--   (nothing else changed it since the lease's take). The key's expiry is
--   left as it was: it covers the stored epoch, and the earlier TAT.
-- Fixed window, ARGV: "f", the stamp's window start, units: the count (the
--   field "start:end" of that window) goes down by units if the key still
--   has that window and it holds at least units (counts beyond 15 digits,
--   which doubles may not hold exactly, are left alone). Its TTL is left as
--   it was (the window's end).
-- Returns 1 if it gave back, else 0.
local key = KEYS[1]
if ARGV[1] == "b" then
  -- The stored state, as take_bucket.lua reads it (its grid as stored).
  local s = bucket_load(key, nil, ARGV[4])
  if not s.f or s.sd ~= ARGV[4] or S(s.th, s.tl) ~= ARGV[2] or S(s.fh, s.fl) ~= ARGV[3] then return 0 end
  s.th, s.tl = P(ARGV[5])
  s.fh, s.fl = P(ARGV[6])
  -- The field of the stored epoch, or of the new TAT's if that is earlier
  -- (v stays >= 0); the key's expiry stays (it covers that epoch).
  local bh, bl = bucket_ms(s.B)
  if cmp(s.th, s.tl, bh, bl) < 0 then s.B = bucket_epoch(s.th, s.tl, s.hms) end
  bucket_save(s, '')
  return 1
end
-- The window's count: the field "start:end" whose start is the stamp's.
local v = redis.call('HKEYS', key)
for i = 1, #v do
  if string.match(v[i], '^(%d+):') == ARGV[2] then
    local c = redis.call('HGET', key, v[i])
    if #c > 15 then return 0 end
    if tonumber(c) < tonumber(ARGV[3]) then return 0 end
    redis.call('HINCRBY', key, v[i], -tonumber(ARGV[3]))
    return 1
  end
end
return 0
