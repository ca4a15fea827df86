#!/usr/bin/env bash
# The cost of the library's metrics: the in-process 1-client and
# the 5-server 64-client TCP scenarios, with the `metrics` feature off and
# with it on and a Prometheus recorder installed.
#
# The feature is chosen at compile time, so both bench binaries are built
# first and then run alternately ROUNDS times, so that both see the same
# machine: switching features inside the loop would rebuild the crate
# between runs. Each run's full table goes to OUT; the last lines print the
# locks/s of every run and the median change.
#
#   bash benches/tools/metrics_overhead.sh [ROUNDS] [SECONDS]
#   SCENARIOS=tcp OUT=dir bash benches/tools/metrics_overhead.sh 12 5
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-8}
seconds=${2:-5}
out=${OUT:-benches/results/$(date -u +%F)/metrics-overhead}
mkdir -p "$out"
# The TCP scenario starts real servers; the same binary serves both builds.
cargo build --release --locked -p quorum-lock-cli
bench_binary() {
  cargo bench --locked -p quorum-lock-benches --no-default-features --features "$1" --bench locks --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "locks" and m.get("executable"):
        print(m["executable"])'
}
bins=$(mktemp -d)
cp "$(bench_binary "")" "$bins/off"
cp "$(bench_binary metrics)" "$bins/on"
scenarios=${SCENARIOS:-inproc tcp}
common=(--nodes 5 --count-rpcs off --redis off --seconds "$seconds" --warmup 0.5)
for round in $(seq 1 "$rounds"); do
  for build in off on; do
    extra=()
    [ "$build" = on ] && extra=(--metrics prometheus)
    for scenario in $scenarios; do
      clients=1
      [ "$scenario" = tcp ] && clients=64
      "$bins/$build" "${common[@]}" "${extra[@]}" --clients "$clients" --transport "$scenario" \
        --json "$out/$scenario-$build-$round.json" > "$out/$scenario-$build-$round.txt"
    done
  done
done
rm -rf "$bins"
python3 - "$out" "$rounds" $scenarios <<'EOF'
import json, statistics, sys
out, rounds, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def rate(path):
    return next(r["lsps"] for r in json.load(open(path))["results"] if r["system"] == "ours")
for scenario in scenarios:
    off = [rate(f"{out}/{scenario}-off-{r}.json") for r in range(1, rounds + 1)]
    on = [rate(f"{out}/{scenario}-on-{r}.json") for r in range(1, rounds + 1)]
    change = statistics.median(on) / statistics.median(off) - 1
    print(f"{scenario}: off {[round(x) for x in off]}")
    print(f"{scenario}: on  {[round(x) for x in on]}")
    print(f"{scenario}: median change {change:+.1%}")
EOF
