"""The Lua scripts: each runs atomically in Redis, so a check and its write can never interleave
with another client's. Amounts travel as exact decimal strings, so Lua's number formatting never
rounds them. Keys are derived from the prefix inside the script (one Redis, not Redis Cluster:
a commit touches documents, markers and nodes that a cluster would spread over slots)."""

from __future__ import annotations

# ARGV[1] key prefix P, ARGV[2] marker TTL (seconds), ARGV[3] msgpack request, ARGV[4] outputs blob:
#   {sentinel, consumer, ids, writes, binds, unbinds, (unused), outbox_key, outbox, published, epoch}
#   writes:  {{kind, name, expected (-1: any), data or false}}
#   binds:   {{cluster, pod, node, entry, {res, amount, res, amount, ...}}}
#   (an entry is the node, then "@uid" and "#devices" lines, then one "res=amount" line per resource)
#   unbinds: {{cluster, pod}}
# The sentinel key P:alive:<sentinel> holds the instance's commit count (its epoch): a commit whose
# epoch (>= 0) is not the stored one is refused, and every commit naming a sentinel increments it.
# Returns {0, v1, ..., vn, e} committed (new versions; 0 for deletes; e the new epoch, with a sentinel)
#         {1, id}              id was processed already (nothing written)
#         {2, i, actual}       write i's expected version does not match
#         {3}                  the sentinel P:alive:<sentinel> is missing (the store was wiped)
#         {4, pod, node}       a pod to bind is bound to another node
#         {5, node, res, short, ...}  the node lacks room
#         {6, node}            the node has no allocatable registered
#         {7, epoch}           the instance committed since the given epoch (another replica)
COMMIT = """
local p, ttl = ARGV[1], tonumber(ARGV[2])
local req = cmsgpack.unpack(ARGV[3])
local sentinel, consumer, ids, writes, binds, unbinds, blob = req[1], req[2], req[3], req[4], req[5], req[6], ARGV[4]
local okey, outbox, published = req[8], req[9], req[10]
if sentinel ~= '' and redis.call('EXISTS', p .. ':alive:' .. sentinel) == 0 then return {3} end
for _, id in ipairs(ids) do
  if redis.call('EXISTS', p .. ':m:' .. consumer .. ':' .. id) == 1 then return {1, id} end
end
if sentinel ~= '' and req[11] and req[11] >= 0 then
  local epoch = tonumber(redis.call('GET', p .. ':alive:' .. sentinel)) or 0
  if epoch ~= req[11] then return {7, epoch} end
end
for i, w in ipairs(writes) do
  if w[3] >= 0 then
    local actual = tonumber(redis.call('HGET', p .. ':v:' .. w[1], w[2]) or '0')
    if actual ~= w[3] then return {2, i, actual} end
  end
end
-- resources that unbinds give back and binds take, per node
local delta, entries, plan = {}, {}, {}
local function add(key, res, amount)
  delta[key] = delta[key] or {}
  delta[key][res] = (delta[key][res] or 0) + amount
end
for _, u in ipairs(unbinds) do
  local bkey = p .. ':bind:' .. u[1]
  local entry = redis.call('HGET', bkey, u[2])
  if entry then
    local node = string.match(entry, '^([^\\n]*)')
    local ukey = p .. ':node:' .. u[1] .. ':' .. node .. ':used'
    entries[#entries + 1] = {bkey, u[2], ukey, entry}
    local first = true
    for line in string.gmatch(entry, '[^\\n]+') do
      if first then first = false elseif not string.find('@#', string.sub(line, 1, 1), 1, true) then
        local res, amount = string.match(line, '^(.*)=([^=]*)$')
        add(ukey, res, -tonumber(amount))
      end
    end
  end
end
local touched = {}
for _, b in ipairs(binds) do
  local bkey = p .. ':bind:' .. b[1]
  local prior = redis.call('HGET', bkey, b[2])
  local released = false
  for _, e in ipairs(entries) do if e[1] == bkey and e[2] == b[2] then released = true end end
  if prior and not released then
    local prior_node = string.match(prior, '^([^\\n]*)')
    if prior_node ~= b[3] then return {4, b[2], prior_node} end
  else
    local base = p .. ':node:' .. b[1] .. ':' .. b[3]
    if redis.call('EXISTS', base .. ':alloc') == 0 then return {6, b[3]} end
    local amounts = b[5]
    for r = 1, #amounts, 2 do add(base .. ':used', amounts[r], tonumber(amounts[r + 1])) end
    touched[base] = true
    plan[#plan + 1] = {bkey, b[2], b[4], base .. ':used', amounts}
  end
end
for base, _ in pairs(touched) do
  local short = {}
  for res, amount in pairs(delta[base .. ':used'] or {}) do
    local declared = redis.call('HGET', base .. ':alloc', res)
    if amount > 0 and declared then
      local alloc = tonumber(declared)
      local used = tonumber(redis.call('HGET', base .. ':used', res) or '0')
      if used + amount > alloc + 1e-9 * math.max(1, math.abs(alloc)) then
        short[#short + 1] = res
        short[#short + 1] = string.format('%.17g', used + amount - alloc)
      end
    end
  end
  if #short > 0 then
    local node = string.match(base, ':([^:]*)$')
    local out = {5, node}
    for _, v in ipairs(short) do out[#out + 1] = v end
    return out
  end
end
-- everything checked: write
for _, e in ipairs(entries) do
  redis.call('HDEL', e[1], e[2])
  local first = true
  for line in string.gmatch(e[4], '[^\\n]+') do
    if first then first = false elseif not string.find('@#', string.sub(line, 1, 1), 1, true) then
      local res, amount = string.match(line, '^(.*)=([^=]*)$')
      redis.call('HINCRBYFLOAT', e[3], res, '-' .. amount)
    end
  end
end
for _, b in ipairs(plan) do
  redis.call('HSET', b[1], b[2], b[3])
  local amounts = b[5]
  for r = 1, #amounts, 2 do redis.call('HINCRBYFLOAT', b[4], amounts[r], amounts[r + 1]) end
end
local result = {0}
for i, w in ipairs(writes) do
  if w[4] == false then
    redis.call('HDEL', p .. ':d:' .. w[1], w[2])
    redis.call('HDEL', p .. ':v:' .. w[1], w[2])
    result[i + 1] = 0
  else
    redis.call('HSET', p .. ':d:' .. w[1], w[2], w[4])
    result[i + 1] = redis.call('HINCRBY', p .. ':v:' .. w[1], w[2], 1)
  end
end
if okey ~= '' then
  redis.call('SET', p .. ':' .. okey, blob, 'EX', ttl)
  if outbox ~= '' then redis.call('RPUSH', p .. ':outbox:' .. outbox, okey) end
end
for _, id in ipairs(ids) do redis.call('SET', p .. ':m:' .. consumer .. ':' .. id, okey, 'EX', ttl) end
-- Published outputs are forgotten: a redelivery long after must not send them again (a latest-value
-- subject would go back to an old value once the bus's duplicate window has passed).
if outbox ~= '' then
  for _, k in ipairs(published) do
    redis.call('LREM', p .. ':outbox:' .. outbox, 0, k)
    redis.call('DEL', p .. ':' .. k)
  end
end
if sentinel ~= '' then result[#result + 1] = redis.call('INCR', p .. ':alive:' .. sentinel) end
return result
"""

# ARGV[1] key prefix P, ARGV[2] msgpack {{cluster, pod, node, entry, {res, amount, ...}}}: bindings a
# changelog recorded, put back into the accounting. A pod already bound is left as it is, so a
# restore that runs twice (interrupted before the sentinel was set) books each request once.
RESTORE_BINDINGS = """
local p = ARGV[1]
local restored = 0
for _, b in ipairs(cmsgpack.unpack(ARGV[2])) do
  if redis.call('HSETNX', p .. ':bind:' .. b[1], b[2], b[4]) == 1 then
    local used = p .. ':node:' .. b[1] .. ':' .. b[3] .. ':used'
    local amounts = b[5]
    for r = 1, #amounts, 2 do redis.call('HINCRBYFLOAT', used, amounts[r], amounts[r + 1]) end
    restored = restored + 1
  end
end
return restored
"""

# KEYS[1] an instance's lease P:lease:<instance>; ARGV[1] the holder's token, ARGV[2] its TTL (ms).
# Taken when nobody holds it, renewed when the caller holds it; returns 1 then, 0 when another does.
TAKE_LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# KEYS[1] the lease, ARGV[1] the holder's token: given back only by its holder.
RELEASE_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
