"""The Lua scripts: each runs atomically in Redis, so a check and its write can never interleave
with another client's. Amounts travel as exact decimal strings, so Lua's number formatting never
rounds them. Every key a script touches comes in ``KEYS`` (the client names them; the request
refers to them by position), as Redis Cluster requires of a script; the keys of one commit are one
instance's (``RedisStore`` names the layout)."""

from __future__ import annotations

import enum


class CommitReply(enum.IntEnum):
    """The first value of ``COMMIT``'s reply; the rest by code (``redis_store.commit_result``)."""

    COMMITTED = 0  # {0, v1, ..., vn, e}: new versions (0 for deletes), e the new epoch (with a sentinel)
    DUPLICATE = 1  # {1, i}: marker i is set already: its event was processed (nothing written)
    CONFLICT = 2  # {2, i, actual}: write i's expected version does not match
    WIPED = 3  # {3}: the sentinel is missing (the store was wiped)
    BOUND_ELSEWHERE = 4  # {4, pod, node}: a pod to bind is bound to another node
    NO_ROOM = 5  # {5, node, res, short, ...}: the node lacks room
    UNKNOWN_NODE = 6  # {6, node}: the node has no allocatable registered
    STALE = 7  # {7, epoch}: the instance committed since the given epoch (another replica)


# KEYS: every key the commit may touch; the request names them by index into KEYS (0: none).
# ARGV[1] marker TTL (seconds), ARGV[2] the request (``keys.CommitRequest``, a msgpack array whose
# fields the script reads by position, in the Struct's order), ARGV[3] the outputs blob. A bind's
# entry is the node, then "@uid" and "#devices" lines, then one "res=amount" line per resource; a
# cluster's usage is one hash, field "<node>\n<res>". The sentinel holds the instance's commit count
# (its epoch): a commit whose epoch (>= 0) is not the stored one is refused, and every commit naming
# a sentinel increments it. The reply: ``CommitReply``.
COMMIT = """
local ttl = tonumber(ARGV[1])
local req = cmsgpack.unpack(ARGV[2])
local alive, markers, writes, binds, unbinds = req[1], req[2], req[3], req[4], req[5]
local okey, outbox, okey_name, published, blob = req[6], req[7], req[8], req[9], ARGV[3]
if alive > 0 and redis.call('EXISTS', KEYS[alive]) == 0 then return {3} end
for i, m in ipairs(markers) do
  if redis.call('EXISTS', KEYS[m]) == 1 then return {1, i} end
end
if alive > 0 and req[10] and req[10] >= 0 then
  local epoch = tonumber(redis.call('GET', KEYS[alive])) or 0
  if epoch ~= req[10] then return {7, epoch} end
end
for i, w in ipairs(writes) do
  if w[3] >= 0 then
    local actual = tonumber(redis.call('HGET', KEYS[w[2]], w[5]) or '0')
    if actual ~= w[3] then return {2, i, actual} end
  end
end
-- resources that unbinds give back and binds take, per usage hash, node and resource (the usage
-- hash's field is "<node>\\n<res>")
local delta, entries, plan = {}, {}, {}
local function add(ukey, node, res, amount)
  delta[ukey] = delta[ukey] or {}
  local nodes = delta[ukey]
  nodes[node] = nodes[node] or {}
  nodes[node][res] = (nodes[node][res] or 0) + amount
end
local function each_amount(entry, fn)
  local first = true
  for line in string.gmatch(entry, '[^\\n]+') do
    if first then first = false elseif not string.find('@#', string.sub(line, 1, 1), 1, true) then
      local res, amount = string.match(line, '^(.*)=([^=]*)$')
      fn(res, amount)
    end
  end
end
for _, u in ipairs(unbinds) do
  local bkey, ukey = KEYS[u[1]], KEYS[u[2]]
  local entry = redis.call('HGET', bkey, u[3])
  if entry then
    local node = string.match(entry, '^([^\\n]*)')
    entries[#entries + 1] = {bkey, u[3], ukey, entry, node}
    each_amount(entry, function(res, amount) add(ukey, node, res, -tonumber(amount)) end)
  end
end
local touched, seen = {}, {}  -- each node a bind takes room on, once
for _, b in ipairs(binds) do
  local bkey, akey, ukey, pod, node = KEYS[b[1]], KEYS[b[2]], KEYS[b[3]], b[4], b[5]
  local prior = redis.call('HGET', bkey, pod)
  local released = false
  for _, e in ipairs(entries) do if e[1] == bkey and e[2] == pod then released = true end end
  if prior and not released then
    local prior_node = string.match(prior, '^([^\\n]*)')
    if prior_node ~= node then return {4, pod, prior_node} end
  else
    if redis.call('EXISTS', akey) == 0 then return {6, node} end
    local amounts = b[7]
    for r = 1, #amounts, 2 do add(ukey, node, amounts[r], tonumber(amounts[r + 1])) end
    if not seen[akey] then
      seen[akey] = true
      touched[#touched + 1] = {akey, ukey, node}
    end
    plan[#plan + 1] = {bkey, pod, b[6], ukey, node, amounts}
  end
end
for _, t in ipairs(touched) do
  local akey, ukey, node = t[1], t[2], t[3]
  local short = {}
  for res, amount in pairs(delta[ukey][node]) do
    local declared = amount > 0 and redis.call('HGET', akey, res)
    if declared then
      local alloc = tonumber(declared)
      local used = tonumber(redis.call('HGET', ukey, node .. '\\n' .. res) or '0')
      if used + amount > alloc + 1e-9 * math.max(1, math.abs(alloc)) then
        short[#short + 1] = res
        short[#short + 1] = string.format('%.17g', used + amount - alloc)
      end
    end
  end
  if #short > 0 then
    local out = {5, node}
    for _, v in ipairs(short) do out[#out + 1] = v end
    return out
  end
end
-- everything checked: write
for _, e in ipairs(entries) do
  redis.call('HDEL', e[1], e[2])
  each_amount(e[4], function(res, amount) redis.call('HINCRBYFLOAT', e[3], e[5] .. '\\n' .. res, '-' .. amount) end)
end
for _, b in ipairs(plan) do
  redis.call('HSET', b[1], b[2], b[3])
  local amounts = b[6]
  for r = 1, #amounts, 2 do redis.call('HINCRBYFLOAT', b[4], b[5] .. '\\n' .. amounts[r], amounts[r + 1]) end
end
local result = {0}
for i, w in ipairs(writes) do
  if w[4] == false then
    redis.call('HDEL', KEYS[w[1]], w[5])
    redis.call('HDEL', KEYS[w[2]], w[5])
    result[i + 1] = 0
  else
    redis.call('HSET', KEYS[w[1]], w[5], w[4])
    result[i + 1] = redis.call('HINCRBY', KEYS[w[2]], w[5], 1)
  end
end
if okey > 0 then
  redis.call('SET', KEYS[okey], blob, 'EX', ttl)
  if outbox > 0 then redis.call('RPUSH', KEYS[outbox], okey_name) end
end
-- a marker points at its outputs by their full key (seen reads them without knowing their instance)
local pointer = okey > 0 and KEYS[okey] or ''
for _, m in ipairs(markers) do redis.call('SET', KEYS[m], pointer, 'EX', ttl) end
-- Published outputs are forgotten: a redelivery long after must not send them again (a latest-value
-- subject would go back to an old value once the bus's duplicate window has passed).
if outbox > 0 then
  for _, k in ipairs(published) do
    redis.call('LREM', KEYS[outbox], 0, k[2])
    redis.call('DEL', KEYS[k[1]])
  end
end
if alive > 0 then result[#result + 1] = redis.call('INCR', KEYS[alive]) end
return result
"""

# KEYS: per cluster its bindings hash and its usage hash; ARGV[1] msgpack
# {{bind index, used index, pod, node, entry, {res, amount, ...}}}: bindings a changelog recorded,
# put back into the accounting. A pod already bound is left as it is, so a restore that runs twice
# (interrupted before the sentinel was set) books each request once.
RESTORE_BINDINGS = """
local restored = 0
for _, b in ipairs(cmsgpack.unpack(ARGV[1])) do
  if redis.call('HSETNX', KEYS[b[1]], b[3], b[5]) == 1 then
    local amounts = b[6]
    for r = 1, #amounts, 2 do redis.call('HINCRBYFLOAT', KEYS[b[2]], b[4] .. '\\n' .. amounts[r], amounts[r + 1]) end
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
