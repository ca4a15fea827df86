//! The Lua scripts of a `RedisLocker`, one per call, each run atomically by
//! Redis.
//!
//! A resource is one hash. Its fields:
//!
//! | field | holds |
//! |---|---|
//! | `m` | the mode of the holders, `w` or `r` |
//! | `f` | the latest fencing token drawn on the resource (kept for clients of earlier versions; the node-wide mark below is what orders tokens) |
//! | `d:uid` | holder `uid`'s deadline, ms on the server's clock |
//! | `o:uid`, `s:uid`, `a:uid` | its owner, source and grant time |
//! | `t:uid`, `c:uid` | its ticket and push channel, when it was granted as a waiter |
//! | `q:uid` | waiter `uid`'s place: ticket (40 digits), mode, deadline, `\|`, channel |
//! | `p:uid` | the proclamation of holder `uid` (leader election): term and seq (20 digits each), then the value's bytes |
//!
//! A resource may also be a plain string instead of a hash: the fast path
//! of a grant (`SET key value NX PX validity`, sent by the client with no
//! script, see `mod.rs`) writes one when the key is absent. Its value is
//! [`FAST_TAG`] (`Q1`), the mode, then uid, validity (ms), owner, source,
//! ticket and channel, each as its length in bytes, `:`, and its bytes; the
//! key's own expiry is the holder's deadline. It stands for exactly the
//! hash of one holder granted at `deadline - validity`: `load` turns it
//! into that hash (`m`, `d:`, `o:`, `s:`, `a:`, and `t:`, `c:` when it has
//! a ticket) before any script looks at it, so every script sees a
//! fast-path holder as the holder it is. `UNLOCK` deletes a string held by
//! its uid in one step, before the prelude is even run.
//!
//! One more key, named by the prefix alone (no resource has an empty
//! name, so no resource key is ever the prefix), holds the node's fencing
//! high-water mark: the highest token ever drawn on that node, as a decimal
//! string, without expiry. Listing and forced unlocks skip it.
//!
//! A proclamation is stored only beside a live exclusive entry of its uid
//! and goes with that entry: `forget` deletes it with the holder's other
//! fields (release, forced unlock, expiry found by any script), `load`
//! drops one whose holder is gone (written by hand, or left by a script of
//! an earlier version), and the key's `PEXPIRE` or `DEL` takes it with the
//! rest. A read reports it only while `load` found its uid holding the key
//! in `w` mode, so a stale one is never reported even before it is deleted.
//!
//! Every script gets one more argument, last: the locker's leader channel
//! (`<prefix>~leader`). A script that stores a proclamation, or drops one
//! (release, forced unlock, expiry it noticed), publishes on it what a read
//! of the key reports now (`P` and the stamp, or `N` for no leader) and
//! the key's name, which the observing lockers turn into
//! `PushEvent::Changed` for their watches on that resource (see
//! `watches.rs`).
//!
//! Every script first drops the holders and places whose deadline passed,
//! and last lets the key expire with its last holder or place (`PEXPIRE`),
//! or deletes it when nobody holds or waits. Tickets are fixed-width decimal
//! strings, so comparing them as strings orders them as numbers; fencing
//! tokens are decimal strings too, because Lua's numbers are doubles and
//! tokens need all 64 bits.

/// The first bytes of a fast-path key's value (see the module docs).
pub(super) const FAST_TAG: &str = "Q1";

/// Shared by every script: the clock, the state of one resource, and the
/// rules of granting and waiting.
pub(super) const PRELUDE: &str = r#"
-- The leader channel: always the last argument.
local LEADER = ARGV[#ARGV]
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t
end
local function forget(key, uid)
  redis.call('HDEL', key, 'd:' .. uid, 'o:' .. uid, 's:' .. uid, 'a:' .. uid, 't:' .. uid, 'c:' .. uid, 'p:' .. uid)
end
-- Notes that the leader of `s` may have changed: a proclamation was
-- stored or dropped. `finish` tells the observers.
local function changed(s)
  s.changed = true
end
-- The hash that a fast-path key (a string, see the module docs) stands
-- for: written in its place, with the key's expiry as the holder's
-- deadline, and returned as HGETALL would return it. A string that is not
-- a fast-path grant is refused as before (WRONGTYPE), and so is any other
-- type (GET raises).
local function unfold(key, now)
  local v = redis.call('GET', key)
  local pttl = redis.call('PTTL', key)
  local fields, i = {}, 4
  local mode = string.sub(v, 3, 3)
  local ok = string.sub(v, 1, 2) == 'Q1' and (mode == 'w' or mode == 'r') and pttl >= 0
  while ok and #fields < 6 do
    local colon = string.find(v, ':', i, true)
    local n = colon and tonumber(string.sub(v, i, colon - 1))
    if not n then
      ok = false
    else
      local f = string.sub(v, colon + 1, colon + n)
      if #f ~= n then ok = false end
      table.insert(fields, f)
      i = colon + n + 1
    end
  end
  local validity = ok and tonumber(fields[2])
  if not validity or i ~= #v + 1 then
    return redis.call('HGETALL', key)
  end
  local uid, deadline = fields[1], now + pttl
  local all = { 'm', mode, 'd:' .. uid, tostring(deadline), 'o:' .. uid, fields[3],
                's:' .. uid, fields[4], 'a:' .. uid, tostring(deadline - validity) }
  if fields[5] ~= '' then
    table.insert(all, 't:' .. uid)
    table.insert(all, fields[5])
    table.insert(all, 'c:' .. uid)
    table.insert(all, fields[6])
  end
  redis.call('DEL', key)
  redis.call('HSET', key, unpack(all))
  -- At once, not only in `finish`: a script that failed after this line
  -- must not leave a key that never expires.
  redis.call('PEXPIRE', key, math.max(pttl, 1))
  return all
end
-- The live state of one resource; expired holders and places are dropped.
local function load(key, now)
  local all = redis.pcall('HGETALL', key)
  if all.err then all = unfold(key, now) end
  local s = { key = key, holders = {}, n = 0, places = {}, np = 0, tickets = {}, channels = {},
              procs = {}, moved = false }
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    local kind, uid = string.sub(f, 1, 2), string.sub(f, 3)
    if f == 'm' then
      s.mode = v
    elseif f == 'f' then
      s.fence = v
    elseif kind == 'd:' then
      local deadline = tonumber(v)
      if deadline <= now then
        forget(key, uid)
        s.moved = true
      else
        s.holders[uid] = deadline
        s.n = s.n + 1
      end
    elseif kind == 'q:' then
      local bar = string.find(v, '|', 42, true)
      local deadline = tonumber(string.sub(v, 42, bar - 1))
      if deadline <= now then
        redis.call('HDEL', key, f)
        s.moved = true
      else
        s.places[uid] = { ticket = string.sub(v, 1, 40), mode = string.sub(v, 41, 41),
                          deadline = deadline, channel = string.sub(v, bar + 1) }
        s.np = s.np + 1
      end
    elseif kind == 't:' then
      s.tickets[uid] = v
    elseif kind == 'c:' then
      s.channels[uid] = v
    elseif kind == 'p:' then
      s.procs[uid] = v
    end
  end
  -- A proclamation lives only as long as its holder: one whose holder
  -- expired above (or was never there) goes, and its observers are told.
  for uid, _ in pairs(s.procs) do
    if s.holders[uid] == nil then
      redis.call('HDEL', key, 'p:' .. uid)
      s.procs[uid] = nil
      changed(s)
    end
  end
  return s
end
-- Whether the holders keep `uid` from holding in `mode`.
local function blocked(s, uid, mode)
  if s.n == 0 then return false end
  if s.mode ~= mode then return true end
  return mode == 'w' and s.holders[uid] == nil
end
-- Whether someone else waits in `mode`'s way with an older ticket (with
-- any ticket, when `ticket` is nil).
local function queued_before(s, uid, mode, ticket)
  for other, p in pairs(s.places) do
    if other ~= uid and (ticket == nil or p.ticket < ticket) and (p.mode == 'w' or mode == 'w') then
      return true
    end
  end
  return false
end
local function grant(s, uid, mode, now, validity, owner, source, ticket, channel)
  local deadline = now + validity
  if s.holders[uid] == nil then
    if ticket then
      redis.call('HSET', s.key, 'm', mode, 'd:' .. uid, deadline, 'o:' .. uid, owner,
                 's:' .. uid, source, 'a:' .. uid, now, 't:' .. uid, ticket, 'c:' .. uid, channel)
    else
      redis.call('HSET', s.key, 'm', mode, 'd:' .. uid, deadline, 'o:' .. uid, owner,
                 's:' .. uid, source, 'a:' .. uid, now)
    end
    s.n = s.n + 1
    s.mode = mode
  elseif ticket and channel ~= '' and s.channels and s.channels[uid] ~= channel then
    -- A re-grant names the channel the waiter listens on now: a grant made
    -- while the waiter had none must still be woundable by push.
    redis.call('HSET', s.key, 'd:' .. uid, deadline, 't:' .. uid, ticket, 'c:' .. uid, channel)
    s.tickets[uid] = ticket
    s.channels[uid] = channel
  else
    redis.call('HSET', s.key, 'd:' .. uid, deadline)
  end
  s.holders[uid] = deadline
end
-- Renews what `uid` holds of the keys, and nothing else.
local function refresh_held(states, uid, now, validity)
  for _, s in ipairs(states) do
    if s.holders[uid] then
      s.holders[uid] = now + validity
      redis.call('HSET', s.key, 'd:' .. uid, now + validity)
    end
  end
end
local function release(s, uid)
  if s.holders[uid] == nil then return false end
  forget(s.key, uid)
  if s.procs and s.procs[uid] then
    s.procs[uid] = nil
    changed(s)
  end
  s.holders[uid] = nil
  s.n = s.n - 1
  s.moved = true
  return true
end
local function unplace(s, uid)
  if s.places[uid] == nil then return end
  redis.call('HDEL', s.key, 'q:' .. uid)
  s.places[uid] = nil
  s.np = s.np - 1
  s.moved = true
end
-- Tells the waiters at the head of the line, if the line moved, that their
-- turn may have come: they ask again and are granted if it has.
local function announce(s)
  if not s.moved or s.np == 0 then return end
  local line = {}
  for uid, p in pairs(s.places) do table.insert(line, { uid = uid, p = p }) end
  table.sort(line, function(a, b) return a.p.ticket < b.p.ticket end)
  for i, w in ipairs(line) do
    if w.p.mode == 'w' then
      if i == 1 and s.n == 0 and w.p.channel ~= '' then
        redis.call('PUBLISH', w.p.channel, 'T' .. w.uid)
      end
      return
    end
    if s.n > 0 and s.mode == 'w' then return end
    if w.p.channel ~= '' then redis.call('PUBLISH', w.p.channel, 'T' .. w.uid) end
  end
end
-- Tells the younger waiters granted in `mode`'s way to give their grant
-- back if they do not hold the lock yet.
local function wound(s, mode, ticket)
  for uid, _ in pairs(s.holders) do
    local t, c = s.tickets[uid], s.channels[uid]
    if t and t > ticket and c and c ~= '' and (s.mode == 'w' or mode == 'w') then
      redis.call('PUBLISH', c, 'W' .. uid)
    end
  end
end
-- What a read of `s` reports now: `P` and the stamp of the live
-- exclusive holder's proclamation, or `N` for none.
local function leader_state(s)
  if s.mode == 'w' then
    for uid, p in pairs(s.procs) do
      if s.holders[uid] then return 'P' .. string.sub(p, 1, 40) end
    end
  end
  return 'N'
end
-- Announces (to waiters, and to observers when the leader may have
-- changed: the new state, then the key), then deletes a key nobody holds
-- or waits for, or lets it expire with its last holder or place.
local function finish(states, now)
  for _, s in ipairs(states) do
    if s.changed then redis.call('PUBLISH', LEADER, leader_state(s) .. s.key) end
    announce(s)
    if s.n == 0 and s.np == 0 then
      redis.call('DEL', s.key)
    else
      if s.n == 0 and s.mode then redis.call('HDEL', s.key, 'm') end
      local last = 0
      for _, d in pairs(s.holders) do if d > last then last = d end end
      for _, p in pairs(s.places) do if p.deadline > last then last = p.deadline end end
      redis.call('PEXPIRE', s.key, last - now)
    end
  end
end
-- The states of the first `n` keys (all of them without `n`).
local function load_all(now, n)
  local states = {}
  for i = 1, n or #KEYS do states[i] = load(KEYS[i], now) end
  return states
end
local function holds_all(states, uid, mode)
  for _, s in ipairs(states) do
    if s.holders[uid] == nil or (mode and s.mode ~= mode) then return false end
  end
  return true
end
-- The fast path of a grant: every key is absent, so nobody holds or waits
-- and nothing expired; write the entries without reading anything.
local function all_absent()
  for _, key in ipairs(KEYS) do
    if redis.call('EXISTS', key) == 1 then return false end
  end
  return true
end
local function grant_absent(uid, mode, now, validity, owner, source, ticket, channel)
  for _, key in ipairs(KEYS) do
    grant({ key = key, holders = {}, n = 0 }, uid, mode, now, validity, owner, source, ticket, channel)
    redis.call('PEXPIRE', key, validity)
  end
end
-- The fast path of an unlock: `uid` is the only holder of `key`, in
-- `mode`, and nobody waits. A holder's fields are written and deleted
-- together (`m` plus d:, o:, s:, a: and, for a waiter, t: and c:), so the
-- field count tells that nothing else is there: no fencing counter, and
-- no proclamation, whose observers the slow path tells.
local function sole_holder(key, uid, mode, now)
  local n = redis.pcall('HLEN', key)
  -- Not a hash (a fast-path key of another uid): `load` unfolds it.
  if type(n) ~= 'number' or (n ~= 5 and n ~= 7) then return false end
  local deadline = tonumber(redis.call('HGET', key, 'd:' .. uid))
  if not deadline or deadline <= now or redis.call('HGET', key, 'm') ~= mode then return false end
  return n == 5 or redis.call('HEXISTS', key, 't:' .. uid) == 1
end
-- The answer of a call refused because the server is in quarantine: the
-- milliseconds left, negated.
local function quarantined(qend, now)
  return -math.max(qend - now, 1)
end
"#;

/// ARGV: uid, mode (`w`/`r`), validity ms, owner, source, quarantine end ms.
/// 1 granted, 0 refused, negative: in quarantine for that many ms. In
/// quarantine nothing is granted and no answer is a grant, not even to a
/// uid that holds every key already (its entries are refreshed).
pub(super) const LOCK: &str = r#"
local uid, mode, validity, qend = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[6])
local now = clock()
if now >= qend and all_absent() then
  grant_absent(uid, mode, now, validity, ARGV[4], ARGV[5])
  return 1
end
local states = load_all(now)
local result = 1
if now < qend then
  refresh_held(states, uid, now, validity)
  result = quarantined(qend, now)
else
  for _, s in ipairs(states) do
    if blocked(s, uid, mode) or queued_before(s, uid, mode, nil) then result = 0 end
  end
  if result == 1 then
    for _, s in ipairs(states) do grant(s, uid, mode, now, validity, ARGV[4], ARGV[5]) end
  end
end
finish(states, now)
return result
"#;

/// ARGV: uid, mode, validity ms, owner, source, quarantine end ms, ticket
/// (40 digits), place ttl ms, push channel (empty: a reservation), and `1`
/// when this is a turn taken for the waiter after a push (it then needs
/// the waiter's place, and never creates or renews one).
/// 1 granted, 2 queued, 0 refused (or, for a turn, nothing to do), 3
/// queued and wounded: the uid holds a grant that an older waiter is
/// queued behind, so it must give its grants back (the re-check carries
/// the wound that a push may not have delivered), negative: in quarantine,
/// where nothing is granted and what the uid holds is refreshed.
pub(super) const WAIT: &str = r#"
local uid, mode, validity, qend = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[6])
local ticket, ttl, channel, turn = ARGV[7], tonumber(ARGV[8]), ARGV[9], ARGV[10] == '1'
local now = clock()
if not turn and now >= qend and all_absent() then
  grant_absent(uid, mode, now, validity, ARGV[4], ARGV[5], ticket, channel)
  return 1
end
local states = load_all(now)
local admitted, placed = true, true
for _, s in ipairs(states) do
  -- The same waiter asking again under a new uid: its old place goes.
  for other, p in pairs(s.places) do
    if other ~= uid and p.ticket == ticket then unplace(s, other) end
  end
  if s.places[uid] == nil then placed = false end
  if blocked(s, uid, mode) or queued_before(s, uid, mode, ticket) then admitted = false end
end
local holds = holds_all(states, uid, mode)
local result
if turn and (holds or not placed) then
  result = 0
elseif now < qend then
  refresh_held(states, uid, now, validity)
  result = quarantined(qend, now)
elseif admitted then
  for _, s in ipairs(states) do
    grant(s, uid, mode, now, validity, ARGV[4], ARGV[5], ticket, channel)
    unplace(s, uid)
  end
  result = 1
elseif turn then
  result = 2
else
  local deadline = now + math.min(ttl, validity)
  local wounded = false
  for _, s in ipairs(states) do
    -- What the uid holds already is refreshed: the answer counts as one.
    -- A grant of it that an older waiter is queued behind is a wound,
    -- told in the answer whether or not a push reached the waiter.
    if s.holders[uid] then
      s.holders[uid] = now + validity
      redis.call('HSET', s.key, 'd:' .. uid, now + validity)
      if queued_before(s, uid, mode, ticket) then wounded = true end
    end
    redis.call('HSET', s.key, 'q:' .. uid, ticket .. mode .. deadline .. '|' .. channel)
    if s.places[uid] == nil then s.np = s.np + 1 end
    s.places[uid] = { ticket = ticket, mode = mode, deadline = deadline, channel = channel }
    wound(s, mode, ticket)
  end
  if wounded then
    result = 3
  elseif channel == '' then
    result = 0
  else
    result = 2
  end
end
finish(states, now)
return result
"#;

/// Runs before the prelude in `UNLOCK`: the fast path of an unlock of one
/// key, as cheap as a compare-and-delete. ARGV[1] is the head of the
/// uid's fast-path value in this mode (tag, mode, uid's length, `:`, uid).
/// `GETRANGE` reads only as many bytes as the head has, so a value that
/// is the uid's compares equal to ARGV[1] without Lua making a new string.
/// An absent key (`GETRANGE` answers an empty string; no value of ours is
/// empty) holds nothing of the uid, its places included, since they live
/// in the key; a fast-path value of another uid or mode is one holder and
/// nothing else, so it is left alone. A hash, or a string that is no
/// fast-path value, goes on to the full script.
pub(super) const UNLOCK_HEAD: &str = r#"
if #KEYS == 1 then
  local v = redis.pcall('GETRANGE', KEYS[1], 0, #ARGV[1] - 1)
  if v == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return 2
  end
  if v == '' then return 0 end
  if type(v) == 'string' and string.sub(v, 1, 2) == 'Q1' then return 0 end
end
"#;

/// ARGV: the head of the uid's fast-path value in the mode (see
/// [`UNLOCK_HEAD`]), which names the uid and the mode. Drops the uid's
/// entries held in that mode and its places. 1 when an entry was dropped,
/// 2 when it was a fast-path key dropped by [`UNLOCK_HEAD`].
pub(super) const UNLOCK: &str = r#"
local mode = string.sub(ARGV[1], 3, 3)
local uid = string.sub(ARGV[1], string.find(ARGV[1], ':', 4, true) + 1)
local now = clock()
local states = {}
local removed = 0
for _, key in ipairs(KEYS) do
  if sole_holder(key, uid, mode, now) then
    redis.call('DEL', key)
    removed = 1
  else
    local s = load(key, now)
    if s.mode == mode and release(s, uid) then removed = 1 end
    unplace(s, uid)
    table.insert(states, s)
  end
end
finish(states, now)
return removed
"#;

/// ARGV: uid, validity ms, mode (empty for a plain refresh), owner, source,
/// quarantine end ms. Refreshes what the uid holds; 1 when it holds every
/// key, 0 when not. In quarantine, a refresh that names its mode re-creates
/// the missing entries where the keys are free for it (all or none), so the
/// holder has them back when the quarantine ends, and every refresh answers
/// the quarantine (negative): an entry this node may have forgotten and
/// re-created vouches for nothing until no grant made before the restart
/// can still be trusted.
pub(super) const REFRESH: &str = r#"
local uid, validity, mode, qend = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[6])
local now = clock()
local states = load_all(now)
local missing = false
for _, s in ipairs(states) do
  if s.holders[uid] then
    s.holders[uid] = now + validity
    redis.call('HSET', s.key, 'd:' .. uid, now + validity)
  else
    missing = true
  end
end
local result = 1
if missing then result = 0 end
if now < qend then
  if missing and mode ~= '' then
    local free = true
    for _, s in ipairs(states) do
      if s.holders[uid] == nil and blocked(s, uid, mode) then free = false end
    end
    if free then
      for _, s in ipairs(states) do grant(s, uid, mode, now, validity, ARGV[4], ARGV[5]) end
    end
  end
  result = quarantined(qend, now)
end
finish(states, now)
return result
"#;

/// KEYS: the resources, then the node's high-water mark. ARGV: uid, mode,
/// floor (decimal), fencing quarantine end ms, clock tolerance in whole
/// seconds. Answers `{kind, value}`:
///
/// * `{1, token}`: the token, when the uid holds every key in that mode:
///   `max(hw + 1, f + 1 of each key, floor, TIME in ns)`, recorded as the
///   new high-water mark and as each key's `f`;
/// * `{0, ''}`: the uid does not hold every key in that mode;
/// * `{negative, ''}`: in quarantine for that many ms, nothing drawn;
/// * `{2, limit}`: the floor is above `limit`, the server's clock plus the
///   tolerance, in ns: refused;
/// * `{3, key}`: the counter of `key` is at `u64::MAX` and cannot grow;
/// * `{4, key}`: `key` holds a counter that is not a token.
pub(super) const FENCE: &str = r#"
local uid, mode, floor = ARGV[1], ARGV[2], ARGV[3]
local qend, tolerance = tonumber(ARGV[4]), tonumber(ARGV[5])
local LAST = '18446744073709551615'
-- a > b, for decimal strings without leading zeros.
local function bigger(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local function plus_one(a)
  local i = #a
  while i > 0 and string.sub(a, i, i) == '9' do i = i - 1 end
  if i == 0 then return '1' .. string.rep('0', #a) end
  return string.sub(a, 1, i - 1) .. string.char(string.byte(a, i) + 1) .. string.rep('0', #a - i)
end
local function token_like(a)
  return string.match(a, '^[1-9]%d*$') ~= nil and not bigger(a, LAST)
end
local now, t = clock()
if now < qend then return { quarantined(qend, now), '' } end
local mark = KEYS[#KEYS]
local states = load_all(now, #KEYS - 1)
local function answer(kind, value)
  finish(states, now)
  return { kind, value }
end
if not holds_all(states, uid, mode) then return answer(0, '') end
-- TIME in ns (its microseconds, times 1000), and the most a floor may be.
local micros = string.format('%06d', tonumber(t[2])) .. '000'
local limit = tostring(tonumber(t[1]) + tolerance) .. micros
if bigger(floor, limit) then return answer(2, limit) end
local token = t[1] .. micros
if bigger(floor, token) then token = floor end
local counters = { { mark, redis.call('GET', mark) } }
for _, s in ipairs(states) do table.insert(counters, { s.key, s.fence }) end
for _, c in ipairs(counters) do
  local key, drawn = c[1], c[2]
  if drawn then
    if not token_like(drawn) then return answer(4, key) end
    if drawn == LAST then return answer(3, key) end
    drawn = plus_one(drawn)
    if bigger(drawn, token) then token = drawn end
  end
end
for _, s in ipairs(states) do redis.call('HSET', s.key, 'f', token) end
redis.call('SET', mark, token)
return answer(1, token)
"#;

/// ARGV: uid, or empty to drop every holder of the keys. The uid's places
/// go with it.
pub(super) const FORCE: &str = r#"
local uid = ARGV[1]
local now = clock()
local states = load_all(now)
local removed = 0
for _, s in ipairs(states) do
  if uid == '' then
    for holder, _ in pairs(s.holders) do
      if release(s, holder) then removed = 1 end
    end
  else
    if release(s, uid) then removed = 1 end
    unplace(s, uid)
  end
end
finish(states, now)
return removed
"#;

/// The server's time in ms, then key, uid, mode, owner, source, grant time
/// and deadline for every live holder of the keys.
pub(super) const LIST: &str = r#"
local now = clock()
local states = load_all(now)
local out = { tostring(now) }
for _, s in ipairs(states) do
  if s.n > 0 then
    local fields = {}
    local all = redis.call('HGETALL', s.key)
    for i = 1, #all, 2 do fields[all[i]] = all[i + 1] end
    for uid, deadline in pairs(s.holders) do
      table.insert(out, s.key)
      table.insert(out, uid)
      table.insert(out, s.mode)
      table.insert(out, fields['o:' .. uid] or '')
      table.insert(out, fields['s:' .. uid] or '')
      table.insert(out, fields['a:' .. uid] or '0')
      table.insert(out, tostring(deadline))
    end
  end
end
finish(states, now)
return out
"#;

/// KEYS: the election's resource. ARGV: uid, stamp (term and seq, 20
/// digits each), value (bytes), quarantine end ms. Stores the proclamation
/// with the uid's exclusive entry unless one with a stamp at least as high
/// is there already, and publishes a change when it stored one. 1 when the
/// entry carries this proclamation or a newer one, 0 when the uid holds no
/// exclusive entry, negative: in quarantine (stored all the same on an
/// entry the uid holds, for when the quarantine ends; the answer counts
/// for nothing).
pub(super) const PROCLAIM: &str = r#"
local uid, stamp, value, qend = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = clock()
local states = load_all(now, 1)
local s = states[1]
local result = 0
if s.mode == 'w' and s.holders[uid] then
  result = 1
  local old = s.procs[uid]
  if old == nil or string.sub(old, 1, 40) < stamp then
    redis.call('HSET', s.key, 'p:' .. uid, stamp .. value)
    s.procs[uid] = stamp .. value
    changed(s)
  end
end
if now < qend then result = quarantined(qend, now) end
finish(states, now)
return result
"#;

/// KEYS: the election's resource. ARGV: quarantine end ms. Answers
/// `{1, stamp .. value}` with the proclamation of the live exclusive
/// holder, `{0, ''}` when there is none (free, read-held, or the holder
/// proclaimed nothing), `{negative, ''}` in quarantine.
pub(super) const LEADER: &str = r#"
local qend = tonumber(ARGV[1])
local now = clock()
local states = load_all(now, 1)
local s = states[1]
local kind, found = 0, ''
if now < qend then
  kind = quarantined(qend, now)
elseif s.mode == 'w' then
  for uid, p in pairs(s.procs) do
    if s.holders[uid] then kind, found = 1, p end
  end
end
finish(states, now)
return { kind, found }
"#;
