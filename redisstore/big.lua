-- sluice redisstore: arbitrary precision for take.lua's slow paths (a
-- product or remainder outside what doubles hold exactly, a fraction moved
-- to another denominator). A number is a table of little-endian 24-bit
-- limbs, each an exact double; products of two limbs stay below 2^48.

local BASE = 16777216

local function norm(a)
  local n = #a
  while n > 0 and a[n] == 0 do a[n] = nil; n = n - 1 end
  return a
end

local function big(s)
  local a = {}
  local i = 1
  local len = #s
  while i <= len do
    local j = math.min(i + 5, len)
    local carry = tonumber(string.sub(s, i, j))
    local mulby = 10 ^ (j - i + 1)
    for k = 1, #a do
      local v = a[k] * mulby + carry
      carry = math.floor(v / BASE)
      a[k] = v - carry * BASE
    end
    while carry > 0 do
      local q = math.floor(carry / BASE)
      a[#a + 1] = carry - q * BASE
      carry = q
    end
    i = j + 1
  end
  return norm(a)
end

local function str(a)
  if #a == 0 then return "0" end
  local x = {}
  for i = 1, #a do x[i] = a[i] end
  local parts = {}
  while #x > 0 do
    local r = 0
    for j = #x, 1, -1 do
      local v = r * BASE + x[j]
      local q = math.floor(v / 1000000)
      r = v - q * 1000000
      x[j] = q
    end
    norm(x)
    parts[#parts + 1] = r
  end
  local s = string.format("%d", parts[#parts])
  for i = #parts - 1, 1, -1 do s = s .. string.format("%06d", parts[i]) end
  return s
end

local function bcmp(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
  end
  return 0
end

local function badd(a, b)
  local r, carry = {}, 0
  for i = 1, math.max(#a, #b) do
    local v = (a[i] or 0) + (b[i] or 0) + carry
    if v >= BASE then r[i] = v - BASE; carry = 1 else r[i] = v; carry = 0 end
  end
  if carry > 0 then r[#r + 1] = carry end
  return r
end

-- sub returns a - b for a >= b.
local function bsub(a, b)
  local r, borrow = {}, 0
  for i = 1, #a do
    local v = a[i] - (b[i] or 0) - borrow
    if v < 0 then r[i] = v + BASE; borrow = 1 else r[i] = v; borrow = 0 end
  end
  return norm(r)
end

local function bmul(a, b)
  local r = {}
  for i = 1, #a + #b do r[i] = 0 end
  for i = 1, #a do
    local carry = 0
    for j = 1, #b do
      local v = r[i + j - 1] + a[i] * b[j] + carry
      carry = math.floor(v / BASE)
      r[i + j - 1] = v - carry * BASE
    end
    local k = i + #b
    while carry > 0 do
      local v = r[k] + carry
      carry = math.floor(v / BASE)
      r[k] = v - carry * BASE
      k = k + 1
    end
  end
  return norm(r)
end

-- bdivmod returns the quotient and remainder of a / p for p > 0, by binary
-- long division.
local function bdivmod(a, p)
  local q, r = {}, {}
  for i = #a, 1, -1 do
    local limb, qd = a[i], 0
    for bit = 23, 0, -1 do
      r = badd(r, r)
      local pow = 2 ^ bit
      if limb >= pow then
        limb = limb - pow
        r = badd(r, {1})
      end
      if bcmp(r, p) >= 0 then
        r = bsub(r, p)
        qd = qd + pow
      end
    end
    q[i] = qd
  end
  return norm(q), r
end

-- mod returns a mod p for p > 0, by binary long division.
local function bmod(a, p)
  if bcmp(a, p) < 0 then return a end
  local r = {}
  for i = #a, 1, -1 do
    local limb = a[i]
    for bit = 23, 0, -1 do
      r = badd(r, r)
      local pow = 2 ^ bit
      if limb >= pow then
        limb = limb - pow
        r = badd(r, {1})
      end
      if bcmp(r, p) >= 0 then r = bsub(r, p) end
    end
  end
  return r
end
