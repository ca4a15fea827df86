#!/usr/bin/env bash
# Checks the deployment recipes and the commands of docs/operating.md:
#
#   deploy/check.sh path/to/quorum-lock
#
# 1. the systemd unit, with `systemd-analyze verify` (ExecStart pointed at
#    the binary), and that the check refuses a broken copy of it;
# 2. compose.yaml, with `docker compose config -q`, or else its structure
#    with python3's yaml module;
# 3. the page's commands against real processes: three servers on loopback
#    ports in a temporary directory, in quarantine with a short --validity;
#    a lock held with `quorum-lock run` through a rolling restart done as
#    the page says (stop one server, start it again, wait until `status`
#    shows its quarantine over, then the next), checked with `status` and
#    `locks`; fencing tokens across it; the metric names the page lists.
#
# Exits non-zero at the first thing that is wrong. Every process it starts
# is stopped by its PID on exit. Takes about 20-30 s.
set -euo pipefail

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 path/to/quorum-lock (an executable)" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
binary=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
page="$root/docs/operating.md"
started=$(date +%s)

work=$(mktemp -d)
declare -A pid=()       # server index -> PID
declare -A addr=()      # server index -> host:port
holder=""               # PID of the `quorum-lock run` holding the lock

cleanup() {
  local status=$?
  set +e
  for p in "${pid[@]}" $holder; do
    kill -TERM "$p" 2>/dev/null
  done
  for p in "${pid[@]}" $holder; do
    wait "$p" 2>/dev/null
  done
  if [ "$status" -ne 0 ]; then
    for log in "$work"/server*.log; do
      [ -e "$log" ] || continue
      echo "--- last lines of $(basename "$log")" >&2
      tail -n 15 "$log" >&2
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT

fail() {
  echo "check.sh: FAILED: $*" >&2
  exit 1
}
step() { echo "== $*"; }
# eventually SECONDS COMMAND: true once COMMAND (a shell string) succeeds,
# tried every 0.2 s; false if it still fails after SECONDS.
eventually() {
  local deadline=$((SECONDS + $1))
  until eval "$2" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

# The recipes must never start a server without quarantine.
step "no --no-quarantine in the recipes"
if grep -v '^[[:space:]]*#' "$here/quorum-lock.service" "$here/Dockerfile" "$here/compose.yaml" |
  grep -q -- '--no-quarantine'; then
  fail "a recipe in deploy/ starts a server with --no-quarantine"
fi
echo "ok"

# --- 1. the systemd unit -------------------------------------------------

# `systemd-analyze verify` exits 0 on unknown keys and bad values (it only
# warns, "ignoring"), so any line about the unit is a failure too.
verify_unit() {
  local unit=$1 out rc=0
  out=$(systemd-analyze verify --man=no "$unit" 2>&1) || rc=$?
  if [ -n "$out" ]; then
    printf '%s\n' "$out" | sed 's/^/  systemd-analyze: /'
  fi
  [ "$rc" -eq 0 ] || return 1
  ! printf '%s\n' "$out" | grep -q "$(basename "$unit")"
}

step "systemd unit"
if command -v systemd-analyze >/dev/null 2>&1; then
  mkdir "$work/unit" "$work/broken"
  unit="$work/unit/quorum-lock.service"
  sed "s|^ExecStart=/usr/local/bin/quorum-lock |ExecStart=$binary |" \
    "$here/quorum-lock.service" >"$unit"
  grep -q "^ExecStart=$binary server " "$unit" ||
    fail "quorum-lock.service has no 'ExecStart=/usr/local/bin/quorum-lock server ...' line"
  verify_unit "$unit" || fail "systemd-analyze verify finds fault with quorum-lock.service"
  # The check itself: a bad value (only a warning to systemd) must fail it.
  sed 's/^Restart=on-failure$/Restart=sometimes/' "$unit" >"$work/broken/quorum-lock.service"
  if verify_unit "$work/broken/quorum-lock.service" >/dev/null; then
    fail "the unit check passed a unit with Restart=sometimes"
  fi
  echo "ok (and a broken copy is refused)"
else
  echo "skipped: systemd-analyze is not installed"
fi

# --- 2. the compose file --------------------------------------------------

step "compose.yaml"
# A copy with token files, so that nothing is checked against (or left in)
# deploy/secrets.
mkdir -p "$work/compose/deploy/secrets"
cp "$here/compose.yaml" "$here/Dockerfile" "$work/compose/deploy/"
echo s3cret >"$work/compose/deploy/secrets/token"
echo adm1n >"$work/compose/deploy/secrets/admin-token"
if docker compose version >/dev/null 2>&1; then
  docker compose -f "$work/compose/deploy/compose.yaml" config -q ||
    fail "docker compose config rejects compose.yaml"
  echo "ok (docker compose config)"
elif command -v python3 >/dev/null 2>&1 && python3 -c 'import yaml' 2>/dev/null; then
  python3 - "$work/compose/deploy/compose.yaml" <<'EOF' || fail "compose.yaml is not what it should be"
import os, sys, yaml
path = sys.argv[1]
with open(path) as f:
    doc = yaml.safe_load(f)  # also resolves the <<: merge keys
services = doc.get("services") or {}
assert sorted(services) == ["node1", "node2", "node3"], f"services: {sorted(services)}"
secrets = doc.get("secrets") or {}
ports = set()
for name, s in services.items():
    assert s.get("image"), f"{name}: no image"
    build = s.get("build") or {}
    dockerfile = os.path.join(os.path.dirname(path), build.get("context", "."), build.get("dockerfile", "Dockerfile"))
    assert os.path.isfile(dockerfile), f"{name}: no Dockerfile at {dockerfile}"
    command = s.get("command") or []
    assert command[:1] == ["server"], f"{name}: command {command}"
    assert "--no-quarantine" not in command, f"{name}: --no-quarantine"
    for secret in s.get("secrets") or []:
        assert secret in secrets, f"{name}: undefined secret {secret}"
        assert os.path.isfile(os.path.join(os.path.dirname(path), secrets[secret]["file"])), secret
    test = " ".join((s.get("healthcheck") or {}).get("test") or [])
    assert "quorum-lock status" in test, f"{name}: healthcheck {test!r}"
    for port in s.get("ports") or []:
        host = port.rsplit(":", 1)[0]
        assert host not in ports, f"{name}: host port {host} used twice"
        ports.add(host)
print("ok (python3 yaml: three nodes, image and build, secrets defined, healthcheck with status, distinct ports)")
EOF
else
  echo "skipped: neither 'docker compose' nor python3 with the yaml module is available"
fi

step "Dockerfile builds the cli package"
grep -q 'cargo install --locked --path cli' "$here/Dockerfile" ||
  fail "the Dockerfile does not run 'cargo install --locked --path cli'"
if [ -f "$root/cli/Cargo.toml" ]; then
  grep -q '^name = "quorum-lock-cli"' "$root/cli/Cargo.toml" ||
    fail "cli/Cargo.toml is not the quorum-lock-cli package"
  echo "ok"
else
  echo "skipped: this checkout has no cli/ package yet"
fi

# --- 3. the page's commands against real servers ---------------------------

[ -f "$page" ] || fail "no docs/operating.md"
# The lines below are run exactly as the page gives them: fail when they
# drift apart. ($node is the server being restarted, host:port.)
WAIT_LINE='until quorum-lock status | grep -Eq "^$node +reachable, .*not quarantined"; do sleep 1; done'
for line in "$WAIT_LINE" 'quorum-lock status' 'quorum-lock locks' \
  'export QUORUM_LOCK_ADMIN_TOKEN_FILE=' 'export QUORUM_LOCK_NODES='; do
  grep -qF -- "$line" "$page" || fail "docs/operating.md no longer gives: $line"
done

# `quorum-lock` on the PATH, as on a node.
mkdir "$work/bin"
ln -s "$binary" "$work/bin/quorum-lock"
export PATH="$work/bin:$PATH"
cd "$work"
(umask 077; echo "client-$RANDOM$RANDOM" >token; echo "admin-$RANDOM$RANDOM" >admin-token)
# At least FENCE_QUARANTINE (4 s): then the end of the quarantine that
# `status` shows is also when the server draws fencing tokens again.
VALIDITY=4s

# A loopback port nothing listens on (bash's /dev/tcp: no other tool needed),
# drawn below the kernel's ephemeral range: a port in that range may be the
# local end of some outgoing connection (or one in TIME_WAIT), which a
# listener cannot bind although nothing listens there (CI run 49: the
# metrics port was refused with "Address already in use").
free_port() {
  local port low=32768
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
  [ "$low" -gt 12000 ] || low=32768
  while :; do
    port=$((10000 + RANDOM % (low - 10000)))
    if ! (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
}

METRICS_ADDR=127.0.0.1:$(free_port)

# start_server I LISTEN: starts server I (in quarantine) and waits for its
# "listening on" line; server 1 also serves metrics.
start_server() {
  local i=$1 listen=$2 extra=() line="" n
  [ "$i" -eq 1 ] && extra=(--metrics "$METRICS_ADDR")
  : >"server$i.out"
  quorum-lock server --listen "$listen" --validity "$VALIDITY" \
    --token-file token --admin-token-file admin-token "${extra[@]}" \
    >"server$i.out" 2>>"server$i.log" &
  pid[$i]=$!
  for n in $(seq 100); do
    line=$(head -n 1 "server$i.out")
    [ -n "$line" ] && break
    if ! kill -0 "${pid[$i]}" 2>/dev/null; then
      # The metrics port was free when drawn but taken since: another one,
      # a few times (the port the server listens on is its own choice).
      if [ "$i" -eq 1 ] && [ "${metrics_tries:-0}" -lt 3 ] &&
        grep -q "cannot serve metrics on .*Address already in use" "server$i.log"; then
        metrics_tries=$((${metrics_tries:-0} + 1))
        METRICS_ADDR=127.0.0.1:$(free_port)
        start_server "$i" "$listen"
        return
      fi
      fail "server $i exited at start (see server$i.log)"
    fi
    sleep 0.1
  done
  case "$line" in
    "listening on "*) addr[$i]=${line#listening on } ;;
    *) fail "server $i did not say 'listening on' within 10 s" ;;
  esac
}

# stop_server I: SIGTERM (what systemctl stop sends), then waits for the exit.
stop_server() {
  local i=$1 n rc=0
  kill -TERM "${pid[$i]}"
  for n in $(seq 100); do
    kill -0 "${pid[$i]}" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "${pid[$i]}" 2>/dev/null && fail "server $i still runs 10 s after SIGTERM"
  wait "${pid[$i]}" || rc=$?
  unset "pid[$i]"
  [ "$rc" -eq 0 ] || fail "server $i exited with $rc on SIGTERM"
}

# The page's wait, bounded here so that a server stuck in quarantine fails.
wait_out_of_quarantine() {
  node=$1 timeout 30 bash -c "$WAIT_LINE" ||
    fail "status did not show $1 out of quarantine within 30 s"
}

# Shows what a server line of `status` says, e.g. "quarantined, 3s left".
status_of() {
  quorum-lock status | grep -E "^$1 " || true
}

step "three servers in quarantine (--validity $VALIDITY)"
for i in 1 2 3; do
  start_server "$i" 127.0.0.1:0
done
export QUORUM_LOCK_NODES="${addr[1]},${addr[2]},${addr[3]}"
export QUORUM_LOCK_TOKEN_FILE=token
export QUORUM_LOCK_ADMIN_TOKEN_FILE=admin-token
for i in 1 2 3; do
  status_of "${addr[$i]}" | grep -Eq "reachable, protocol [0-9]+, quarantined, .* left" ||
    fail "server $i does not start in quarantine: $(status_of "${addr[$i]}")"
done
for i in 1 2 3; do
  wait_out_of_quarantine "${addr[$i]}"
done
quorum-lock status
[ "$(quorum-lock status | grep -cE '^127[.0-9]+:[0-9]+ +reachable, .*not quarantined, 0 entries$')" -eq 3 ] ||
  fail "status does not show three reachable servers out of quarantine"

step "a lock held with quorum-lock run"
quorum-lock run --owner deploy-check held -- \
  sh -c 'echo "$QUORUM_LOCK_FENCING_TOKEN" >fence1; while [ ! -e release ]; do sleep 0.1; done' &
holder=$!
for n in $(seq 100); do
  [ -s fence1 ] && break
  kill -0 "$holder" 2>/dev/null || fail "quorum-lock run exited before its command ran"
  sleep 0.1
done
[ -s fence1 ] || fail "quorum-lock run did not get the lock within 10 s"
fence1=$(cat fence1)
[[ $fence1 =~ ^[0-9]+$ ]] || fail "no fencing token in the command's environment: '$fence1'"
rc=0
quorum-lock run --timeout 1s held -- true 2>/dev/null || rc=$?
[ "$rc" -eq 75 ] || fail "a second run got the held lock, or failed otherwise (exit $rc, expected 75)"
quorum-lock locks
# run starts its command once a quorum granted; the third grant may land a
# moment later, so wait for the state instead of assuming it.
eventually 10 "quorum-lock locks | grep -Eq '^held +write +deploy-check +.* 3/3 '" ||
  fail "locks does not show 'held' on 3/3 nodes"
echo "held, fencing token $fence1; a second run times out (75)"

step "rolling restart, one server at a time"
for i in 1 2 3; do
  node=${addr[$i]}
  stop_server "$i"
  start_server "$i" "$node"
  [ "${addr[$i]}" = "$node" ] || fail "server $i came back on ${addr[$i]}, not $node"
  status_of "$node" | grep -Eq "reachable, .*quarantined, .* left" ||
    fail "server $i is not in quarantine after its restart: $(status_of "$node")"
  echo "restarted $node: $(status_of "$node" | sed -E 's/^[^ ]+ +//')"
  wait_out_of_quarantine "$node"
  echo "  out of quarantine after $(($(date +%s) - started)) s of the check"
  kill -0 "$holder" 2>/dev/null || fail "the holder lost its lock when server $i restarted"
done
quorum-lock status
# The last restarted server gets the entry back at the holder's next refresh.
eventually 10 "[ \"\$(quorum-lock status | grep -cE '^127[.0-9]+:[0-9]+ +reachable, .*not quarantined, 1 entry\$')\" -eq 3 ]" ||
  fail "after the rolling restart, status does not show the held lock's entry on all three servers"
eventually 10 "quorum-lock locks | grep -Eq '^held +write +deploy-check +.* 3/3 '" ||
  fail "after the rolling restart, locks does not show 'held' on 3/3 nodes"

step "the holder kept its lock throughout"
touch release
rc=0
wait "$holder" || rc=$?
holder=""
[ "$rc" -eq 0 ] || fail "quorum-lock run exited with $rc (79: the lock was lost)"
quorum-lock run held -- sh -c 'echo "$QUORUM_LOCK_FENCING_TOKEN" >fence2'
fence2=$(cat fence2)
[[ $fence2 =~ ^[0-9]+$ ]] && [ "$fence2" -gt "$fence1" ] ||
  fail "the next holder's fencing token '$fence2' is not above $fence1"
echo "released; the next holder's fencing token $fence2 > $fence1"

step "the metrics the page lists"
if command -v curl >/dev/null 2>&1; then
  scrape=$(curl -fsS "http://$METRICS_ADDR/metrics") || fail "no metrics on $METRICS_ADDR"
else
  exec 3<>"/dev/tcp/${METRICS_ADDR%:*}/${METRICS_ADDR#*:}"
  printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$METRICS_ADDR" >&3
  scrape=$(cat <&3)
  exec 3<&-
fi
names=$(grep -oE '\bquorum_lock_[a-z_]+' "$page" | sort -u)
[ -n "$names" ] || fail "docs/operating.md names no metric"
for name in $names; do
  case "$name" in
    quorum_lock_server_*)
      # A histogram shows as name_bucket, name_sum and name_count.
      grep -qE "^${name}(_bucket|_sum|_count)?(\{| )" <<<"$scrape" ||
        fail "the page lists $name, which the server does not export"
      ;;
    *)
      # Recorded by the library in the application (feature "metrics").
      grep -rqF "\"$name\"" "$root/src" ||
        fail "the page lists $name, which the library does not record"
      ;;
  esac
done
echo "ok: $(wc -w <<<"$names") names"

echo "== all checks passed in $(($(date +%s) - started)) s"
