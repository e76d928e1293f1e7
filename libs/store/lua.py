"""The Lua scripts: each runs atomically in Redis, so a check and its write can never interleave
with another client's. Keys are always passed in KEYS (cluster-safe); values in ARGV are exact
decimal strings, so resource amounts are never rounded by Lua's number formatting."""

from __future__ import annotations

# KEYS[1]      marker key (processed:{consumer}:{event_id}); ignored when ARGV[1] == "0"
# KEYS[2i]     data hash of write i's kind;  KEYS[2i+1] version hash of write i's kind
# ARGV[1]      marker TTL in seconds, "0" = no marker (plain CAS)
# ARGV[2]      outputs blob stored as the marker's value
# ARGV[3..]    per write: name, expected version ("" = any), op ("p" put / "d" delete), data
# Returns {0, v1, v2, ...} applied; {1, outputs} duplicate; {2, i, actual} conflict on write i.
APPLY = """
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  local prior = redis.call('GET', KEYS[1])
  if prior then return {1, prior} end
end
local n = (#ARGV - 2) / 4
for i = 1, n do
  local base = 3 + (i - 1) * 4
  local expected = ARGV[base + 1]
  if expected ~= '' then
    local actual = tonumber(redis.call('HGET', KEYS[2 * i + 1], ARGV[base]) or '0')
    if actual ~= tonumber(expected) then return {2, i, actual} end
  end
end
local result = {0}
for i = 1, n do
  local base = 3 + (i - 1) * 4
  local name = ARGV[base]
  if ARGV[base + 2] == 'd' then
    redis.call('HDEL', KEYS[2 * i], name)
    redis.call('HDEL', KEYS[2 * i + 1], name)
    result[i + 1] = 0
  else
    redis.call('HSET', KEYS[2 * i], name, ARGV[base + 3])
    result[i + 1] = redis.call('HINCRBY', KEYS[2 * i + 1], name, 1)
  end
end
if ttl > 0 then redis.call('SET', KEYS[1], ARGV[2], 'EX', ttl) end
return result
"""

# KEYS[1]          binding hash of the cluster (pod -> "node\\nres=amount\\n...")
# KEYS[2j], [2j+1] allocatable hash and used hash of node j (j = 1..#nodes)
# ARGV[1]          number of nodes; ARGV[2..1+#nodes] node names
# then per binding: pod, node index j, entry, k, res_1, amount_1, ..., res_k, amount_k
# Returns {0} bound; {1, node, res, shortfall, ...} not enough; {2, pod, node} pod bound elsewhere.
BIND_GANG = """
local nn = tonumber(ARGV[1])
local need = {}
for j = 1, nn do need[j] = {} end
local plan = {}
local i = nn + 2
while i <= #ARGV do
  local pod, j, entry, k = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], tonumber(ARGV[i + 3])
  local node = ARGV[1 + j]
  local prior = redis.call('HGET', KEYS[1], pod)
  local skip = false
  if prior then
    local prior_node = string.match(prior, '^([^\\n]*)')
    if prior_node ~= node then return {2, pod, prior_node} end
    skip = true
  end
  local amounts = {}
  for r = 0, k - 1 do
    local res, amount = ARGV[i + 4 + 2 * r], ARGV[i + 5 + 2 * r]
    amounts[#amounts + 1] = {res, amount}
    if not skip then need[j][res] = (need[j][res] or 0) + tonumber(amount) end
  end
  if not skip then plan[#plan + 1] = {pod, j, entry, amounts} end
  i = i + 4 + 2 * k
end
for j = 1, nn do
  if redis.call('EXISTS', KEYS[2 * j]) == 0 then return {1, ARGV[1 + j]} end
  local short = {}
  for res, amount in pairs(need[j]) do
    local alloc = tonumber(redis.call('HGET', KEYS[2 * j], res) or '0')
    local used = tonumber(redis.call('HGET', KEYS[2 * j + 1], res) or '0')
    local tolerance = 1e-9 * math.max(1, math.abs(alloc))
    if used + amount > alloc + tolerance then
      short[#short + 1] = res
      short[#short + 1] = string.format('%.17g', used + amount - alloc)
    end
  end
  if #short > 0 then
    local out = {1, ARGV[1 + j]}
    for _, v in ipairs(short) do out[#out + 1] = v end
    return out
  end
end
for _, p in ipairs(plan) do
  redis.call('HSET', KEYS[1], p[1], p[3])
  for _, ra in ipairs(p[4]) do redis.call('HINCRBYFLOAT', KEYS[2 * p[2] + 1], ra[1], ra[2]) end
end
return {0}
"""

# KEYS[1] binding hash; KEYS[1+i] used hash of pod i's node. ARGV: per pod: pod, entry as read.
# Releases each pod whose binding is still exactly that entry. Returns the number released.
RELEASE = """
local released = 0
for i = 1, #ARGV / 2 do
  local pod, entry = ARGV[2 * i - 1], ARGV[2 * i]
  if redis.call('HGET', KEYS[1], pod) == entry then
    redis.call('HDEL', KEYS[1], pod)
    local first = true
    for line in string.gmatch(entry, '[^\\n]+') do
      if first then first = false else
        local res, amount = string.match(line, '^(.*)=([^=]*)$')
        redis.call('HINCRBYFLOAT', KEYS[1 + i], res, '-' .. amount)
      end
    end
    released = released + 1
  end
end
return released
"""
