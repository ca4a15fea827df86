//! The Lua scripts of a `RedisLocker`, one per call, each run atomically by
//! Redis. A resource is a hash: `m` holds the mode (`w` or `r`), and each
//! holder `uid` has `d:uid` (its deadline in ms on the server's clock),
//! `o:uid` (owner), `s:uid` (source) and `a:uid` (grant time).

/// Reads the server clock and drops the expired holders of a key. Shared by
/// every script.
pub(super) const PRELUDE: &str = r#"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The mode of `key` and whether `uid` holds it, after dropping expired
-- holders; nil mode when nobody holds it.
local function live(key, now, uid)
  local all = redis.call('HGETALL', key)
  local mode, holders, mine = nil, 0, false
  for i = 1, #all, 2 do
    local f = all[i]
    if f == 'm' then
      mode = all[i + 1]
    elseif string.sub(f, 1, 2) == 'd:' then
      local holder = string.sub(f, 3)
      if tonumber(all[i + 1]) <= now then
        redis.call('HDEL', key, f, 'o:' .. holder, 's:' .. holder, 'a:' .. holder)
      else
        holders = holders + 1
        if holder == uid then mine = true end
      end
    end
  end
  if holders == 0 then
    if mode then redis.call('DEL', key) end
    return nil, false
  end
  return mode, mine
end
-- Lets the key expire with its last holder.
local function keep_until_last(key, now)
  local all = redis.call('HGETALL', key)
  local last = 0
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 2) == 'd:' then
      last = math.max(last, tonumber(all[i + 1]))
    end
  end
  if last > now then redis.call('PEXPIRE', key, last - now) end
end
local function drop(key, uid)
  redis.call('HDEL', key, 'd:' .. uid, 'o:' .. uid, 's:' .. uid, 'a:' .. uid)
  if redis.call('HLEN', key) <= 1 then redis.call('DEL', key) end
end
"#;

/// ARGV: uid, mode (`w`/`r`), validity in ms, owner, source.
pub(super) const LOCK: &str = r#"
local uid, mode, validity = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()
for _, key in ipairs(KEYS) do
  local held, mine = live(key, now, uid)
  if held and (held ~= mode or (mode == 'w' and not mine)) then return 0 end
end
for _, key in ipairs(KEYS) do
  if redis.call('HEXISTS', key, 'd:' .. uid) == 0 then
    redis.call('HSET', key, 'm', mode, 'o:' .. uid, ARGV[4], 's:' .. uid, ARGV[5], 'a:' .. uid, now)
  end
  redis.call('HSET', key, 'd:' .. uid, now + validity)
  keep_until_last(key, now)
end
return 1
"#;

/// ARGV: uid, mode. 1 when the uid held something in that mode.
pub(super) const UNLOCK: &str = r#"
local uid, mode = ARGV[1], ARGV[2]
local now = now_ms()
local removed = 0
for _, key in ipairs(KEYS) do
  local held, mine = live(key, now, uid)
  if mine and held == mode then
    drop(key, uid)
    removed = 1
  end
end
return removed
"#;

/// ARGV: uid, validity in ms. 1 when the uid holds every key.
pub(super) const REFRESH: &str = r#"
local uid, validity = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
for _, key in ipairs(KEYS) do
  local held, mine = live(key, now, uid)
  if not mine then return 0 end
end
for _, key in ipairs(KEYS) do
  redis.call('HSET', key, 'd:' .. uid, now + validity)
  keep_until_last(key, now)
end
return 1
"#;

/// ARGV: uid, or empty to drop every holder of the keys.
pub(super) const FORCE: &str = r#"
local uid = ARGV[1]
local now = now_ms()
local removed = 0
for _, key in ipairs(KEYS) do
  local held, mine = live(key, now, uid)
  if uid == '' and held then
    redis.call('DEL', key)
    removed = 1
  elseif uid ~= '' and mine then
    drop(key, uid)
    removed = 1
  end
end
return removed
"#;

/// The server's time in ms, then key, uid, mode, owner, source, grant time
/// and deadline for every live holder of the keys.
pub(super) const LIST: &str = r#"
local now = now_ms()
local out = { tostring(now) }
for _, key in ipairs(KEYS) do
  local held = live(key, now, '')
  if held then
    local all = redis.call('HGETALL', key)
    local fields = {}
    for i = 1, #all, 2 do fields[all[i]] = all[i + 1] end
    for f, v in pairs(fields) do
      if string.sub(f, 1, 2) == 'd:' then
        local uid = string.sub(f, 3)
        table.insert(out, key)
        table.insert(out, uid)
        table.insert(out, held)
        table.insert(out, fields['o:' .. uid] or '')
        table.insert(out, fields['s:' .. uid] or '')
        table.insert(out, fields['a:' .. uid] or '0')
        table.insert(out, v)
      end
    end
  end
end
return out
"#;
