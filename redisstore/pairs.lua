-- sluice redisstore: exact integers for take.lua. Every number is a
-- non-negative integer v held as a pair (h, l) of exact doubles with
-- v = h*10^9 + l and 0 <= l < 10^9 (for an instant: seconds and
-- nanoseconds), read from and written as decimal strings. Sums and
-- comparisons of pairs are exact. The two operations that can leave that
-- range, a product (mulcmp) and a remainder (mod), take a fast path when
-- doubles are provably exact and otherwise fall back to big.lua.

local G = 1000000000
local EXACT = 9007199254740992 -- 2^53

-- P parses a decimal string into a pair.
local function P(s)
  local n = #s
  if n <= 9 then return 0, tonumber(s) end
  return tonumber(string.sub(s, 1, n - 9)), tonumber(string.sub(s, n - 8))
end

-- S formats a pair as a decimal string.
local function S(h, l)
  if h == 0 then return string.format("%d", l) end
  return string.format("%d%09d", h, l)
end

local function add(ah, al, bh, bl)
  local l = al + bl
  if l >= G then return ah + bh + 1, l - G end
  return ah + bh, l
end

-- sub returns a - b for a >= b.
local function sub(ah, al, bh, bl)
  local l = al - bl
  if l < 0 then return ah - bh - 1, l + G end
  return ah - bh, l
end

local function cmp(ah, al, bh, bl)
  if ah ~= bh then return ah < bh and -1 or 1 end
  if al ~= bl then return al < bl and -1 or 1 end
  return 0
end

local function maxp(ah, al, bh, bl)
  if cmp(ah, al, bh, bl) >= 0 then return ah, al end
  return bh, bl
end

local function pbig(h, l) return big(S(h, l)) end

-- mulcmp compares a*b with c*d.
local function mulcmp(ah, al, bh, bl, ch, cl, dh, dl)
  local a, b, c, d = ah * G + al, bh * G + bl, ch * G + cl, dh * G + dl
  if a < EXACT and b < EXACT and c < EXACT and d < EXACT then
    local x, y = a * b, c * d
    if x < EXACT and y < EXACT then
      if x < y then return -1 elseif x > y then return 1 end
      return 0
    end
  end
  return bcmp(bmul(pbig(ah, al), pbig(bh, bl)), bmul(pbig(ch, cl), pbig(dh, dl)))
end

-- mod returns a mod p, for p > 0.
local function mod(ah, al, ph, pl)
  if cmp(ah, al, ph, pl) < 0 then return ah, al end
  if pl == 0 then return ah % ph, al end -- whole seconds
  if ph == 0 and G % pl == 0 then return 0, al % pl end -- divides a second
  local a, p = ah * G + al, ph * G + pl
  if a < EXACT / 2 then -- then every intermediate of a % p is exact
    local r = a % p
    if r >= 0 and r < p then return math.floor(r / G), r % G end
  end
  return P(str(bmod(pbig(ah, al), pbig(ph, pl))))
end

-- Instants with a fraction, ns + frac/den, as two pairs.
local function radd(ah, al, afh, afl, bh, bl, bfh, bfl, dh, dl)
  local nh, nl = add(ah, al, bh, bl)
  local fh, fl = add(afh, afl, bfh, bfl)
  if cmp(fh, fl, dh, dl) >= 0 then
    fh, fl = sub(fh, fl, dh, dl)
    nh, nl = add(nh, nl, 0, 1)
  end
  return nh, nl, fh, fl
end

local function rless(ah, al, afh, afl, bh, bl, bfh, bfl)
  local c = cmp(ah, al, bh, bl)
  return c < 0 or (c == 0 and cmp(afh, afl, bfh, bfl) < 0)
end
