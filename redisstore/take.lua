-- sluice redisstore: the atomic part of a batch of rate-limiting decisions
-- (TakeAll, and what the one-request scripts do not decide). Follows
-- big.lua, pairs.lua and one file per algorithm, take_<name>.lua (store.go
-- joins them), each with <name>_load(key, list key, denominator): the
-- key's state; <name>_take(state, request): admitted, and up to four
-- strings of the state it saw; and <name>_save(state, expiry, ttl ms).
--
-- The Go models are the oracle. This script only reads each key's state,
-- evaluates the admission predicate of its algorithm exactly, and, when
-- every request of the batch is admitted, writes the new states and sets
-- each key's expiry; otherwise it writes nothing. It returns the instant it
-- used and, per request, the state that request saw, from which the Go side
-- computes the full decision with the model. Numbers are pairs (pairs.lua),
-- exact over the models' whole range.
--
-- KEYS: two per request: the state hash, and the sliding-log list.
-- ARGV[1]: now in nanoseconds, or "" to read Redis TIME.
-- ARGV[2]: milliseconds added to every TTL (0 when the time is Redis TIME).
-- ARGV[3]: the number of requests; then 9 fields per request:
--   kind ("b" bucket, "f" fixed window, "w" sliding window, "l" sliding log;
--   "F" and "W" for the windows of a calendar), cost ("!" before it: a
--   charge, take_charge.lua), capacity (burst or limit), period, dur(cost) ns, dur(cost) frac, dur(burst) ns,
--   dur(burst) frac, denominator. For "F" and "W" the four dur fields are
--   instead the calendar window computed in Go: its start, its end, the
--   previous window's start and the next window's end (ns).
-- Returns {now, committed ("1"/"0"), then 4 strings per request: the state
-- it saw}; when committed is "0", 4 more per request follow: for an
-- admitted request or a charge, its key's stored state as its policy reads
-- it (as a peek would), else empty. committed
-- is "2" when a calendar window given does not hold the instant decided at
-- (max(now, the stored window start)): nothing is written, and Go sends the
-- window that does.

-- The algorithms' functions, by kind (if-chains rather than tables: the
-- script's top level runs on every call, and tables of functions would be
-- made each time).
local function load(kind, key, lkey, den)
  if kind == "b" then return bucket_load(key, lkey, den)
  elseif kind == "f" then return fixed_load(key)
  elseif kind == "w" then return window_load(key) end
  return slidinglog_load(key, lkey)
end

local function take(kind, s, r)
  if kind == "b" then return bucket_take(s, r)
  elseif kind == "f" then return fixed_take(s, r)
  elseif kind == "w" then return window_take(s, r) end
  return slidinglog_take(s, r)
end

local function save(kind, s, x, ms)
  if kind == "b" then return bucket_save(s, x)
  elseif kind == "f" then return fixed_save(s, x)
  elseif kind == "w" then return window_save(s, x) end
  return slidinglog_save(s, x, ms)
end

local nh, nl
if ARGV[1] == "" then
  local t = redis.call('TIME')
  nh, nl = tonumber(t[1]), tonumber(t[2]) * 1000
else
  nh, nl = P(ARGV[1])
end
local slack, n = tonumber(ARGV[2]), tonumber(ARGV[3])
local states, order, oks = {}, {}, {}
local out, all = {S(nh, nl), "0"}, true
-- The request being decided, passed to the algorithm's take (which keeps
-- nothing of it): one table, made once.
local r = {a = 0, nh = nh, nl = nl, ch = 0, cl = 0, kh = 0, kl = 0, ph = 0, pl = 0,
  costpos = false, jh = 0, jl = 0, cal = false, retry = false}
-- request sets r to request i (its cost judged as a peek's if peek) and
-- returns its kind (lower case), its state key, whether it is a charge,
-- and where its arguments begin.
local function request(i, peek)
  local a = 3 + (i - 1) * 9
  -- The request: cost, capacity, period, and the cost judged (a peek,
  -- cost 0, is admitted iff cost 1 would be).
  local costs, force = ARGV[a + 2], false
  if string.sub(costs, 1, 1) == "!" then costs, force = string.sub(costs, 2), true end
  local ch, cl = P(costs)
  if peek then ch, cl = 0, 0 end
  r.a, r.ch, r.cl = a, ch, cl
  r.kh, r.kl = P(ARGV[a + 3])
  r.ph, r.pl = P(ARGV[a + 4])
  r.costpos = ch > 0 or cl > 0
  r.jh, r.jl = ch, cl
  if not r.costpos then r.jh, r.jl = 0, 1 end
  local kind = ARGV[a + 1]
  r.cal = kind == "F" or kind == "W" -- a calendar window (calwin)
  if r.cal then kind = string.lower(kind) end
  return kind, KEYS[2 * i - 1], force, a
end
for i = 1, n do
  local kind, key, force, a = request(i, false)
  local costpos = r.costpos
  local s = states[key]
  if not s then
    s = load(kind, key, KEYS[2 * i], ARGV[a + 9])
    s.kind = kind
    states[key] = s
    order[#order + 1] = key
  end
  local ok, o1, o2, o3, o4
  if force and costpos then -- a charge never refuses the batch
    o1, o2, o3, o4 = charge(s, kind, r)
    ok = true
  else
    ok, o1, o2, o3, o4 = take(kind, s, r)
    ok = ok or force -- a charge of nothing peeks, and never refuses the batch
  end
  all = all and ok
  oks[i] = ok
  local m = #out
  out[m + 1], out[m + 2], out[m + 3], out[m + 4] = o1 or "", o2 or "", o3 or "", o4 or ""
end
if not all and not r.retry then
  -- A refused batch writes nothing, and Go decides each admitted request
  -- and each charge as a peek on its key's stored state. Append, per
  -- request, that state as the request's own policy reads it (a bucket's
  -- TAT on its grid, a log's entries inside its window), which another
  -- policy of the same name need not read alike.
  for i = 1, n do
    local _, o1, o2, o3, o4
    if oks[i] then
      local kind, key, _, a = request(i, true)
      local s = load(kind, key, KEYS[2 * i], ARGV[a + 9])
      _, o1, o2, o3, o4 = take(kind, s, r)
    end
    local m = #out
    out[m + 1], out[m + 2], out[m + 3], out[m + 4] = o1 or "", o2 or "", o3 or "", o4 or ""
  end
  r.retry = false -- the windows held the instants decided at: the states read here need none
end
if r.retry then -- a calendar window given does not hold the instant
  out[2] = "2"
  return out
end
if all then
  for _, key in ipairs(order) do
    local s = states[key]
    if s.dirty then
      -- ceil((x - now) / 1ms), at least 1, plus the slack
      local dh, dl = sub(s.xh, s.xl, nh, nl)
      local ms = math.max(dh * 1000 + math.ceil(dl / 1000000), 1)
      ms = string.format("%d", ms + slack)
      save(s.kind, s, S(s.xh, s.xl), ms)
      redis.call('PEXPIRE', key, ms)
    end
  end
  out[2] = "1"
end
return out
