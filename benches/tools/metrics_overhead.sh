#!/usr/bin/env bash
# The cost of the library's metrics (issue #14): the in-process 1-client and
# the 5-server 64-client TCP scenarios, with the `metrics` feature off and
# with it on and a Prometheus recorder installed, alternating the two builds
# ROUNDS times so that both see the same machine. Prints each run's table;
# compare_runs.py or a look at the lock/s columns gives the medians.
#
#   bash benches/tools/metrics_overhead.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
seconds=${2:-5}
out=${OUT:-benches/results/$(date -u +%F)/metrics-overhead}
mkdir -p "$out"
# The TCP scenario starts real servers; the same binary serves both builds.
cargo build --release --locked --features cli --bin quorum-lock
common=(--nodes 5 --count-rpcs off --redis off --seconds "$seconds" --warmup 0.5)
for round in $(seq 1 "$rounds"); do
  for build in off on; do
    if [ "$build" = on ]; then
      features=(--features net,metrics)
      extra=(--metrics prometheus)
    else
      features=(--features net)
      extra=()
    fi
    echo "== round $round, metrics $build: in process, 1 client"
    cargo bench --locked "${features[@]}" --bench locks -- "${common[@]}" "${extra[@]}" \
      --clients 1 --transport inproc --json "$out/inproc-$build-$round.json"
    echo "== round $round, metrics $build: tcp, 64 clients"
    cargo bench --locked "${features[@]}" --bench locks -- "${common[@]}" "${extra[@]}" \
      --clients 64 --transport tcp --json "$out/tcp-$build-$round.json"
  done
done
