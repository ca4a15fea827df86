#!/usr/bin/env python3
"""Medians of repeated benchmark runs, and their ratio to a baseline.

    compare_runs.py BASE_GLOB OTHER_GLOB [OTHER_GLOB ...]

Each GLOB names the JSON files (`--json`) of one build, run several times.
Rows are grouped by (wait, transport, nodes, clients, names, mix, hold); a
group of the base build is compared with every group of the other builds
that has the same scenario apart from `wait` (the base may predate the
option, when every run polled). Prints, per group, every run's locks/s, the
median, CPU time per lock (cpu cores x seconds / locks, less sensitive to
other load than locks/s), median p50, and the median's ratio to the base.
"""
import glob
import json
import statistics
import sys


def load(pattern):
    groups = {}
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"no files match {pattern}")
    for path in files:
        with open(path) as f:
            data = json.load(f)
        for r in data["results"]:
            if r["system"] != "ours":
                continue
            shape = (r["transport"], r["nodes"], r["clients"], r["names"], r["mix"], r["hold"])
            groups.setdefault((r["wait"], shape), []).append(r)
    return groups


def summary(runs):
    lsps = [r["lsps"] for r in runs]
    cpu = [r["cpu_cores"] * r["seconds"] / max(r["locks"], 1) * 1e6 for r in runs]
    p50 = [r["p50_ns"] / 1e3 for r in runs]
    return statistics.median(lsps), statistics.median(cpu), statistics.median(p50), lsps


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    base = load(sys.argv[1])
    others = [(pattern, load(pattern)) for pattern in sys.argv[2:]]
    for (bwait, shape), bruns in sorted(base.items()):
        b_lsps, b_cpu, b_p50, b_all = summary(bruns)
        t, n, c, names, mix, hold = shape
        print(f"{t} nodes {n} clients {c} {names} {mix} hold {hold}")
        runs = " ".join(f"{x / 1e3:.1f}k" for x in b_all)
        print(f"  base  {bwait:<4} median {b_lsps / 1e3:7.1f}k/s  cpu {b_cpu:6.2f}us/lock  p50 {b_p50:6.2f}us  runs {runs}")
        for pattern, groups in others:
            for (wait, oshape), oruns in sorted(groups.items()):
                if oshape != shape:
                    continue
                o_lsps, o_cpu, o_p50, o_all = summary(oruns)
                runs = " ".join(f"{x / 1e3:.1f}k" for x in o_all)
                print(
                    f"  other {wait:<4} median {o_lsps / 1e3:7.1f}k/s  cpu {o_cpu:6.2f}us/lock  p50 {o_p50:6.2f}us  "
                    f"runs {runs}  rate {100 * (o_lsps / b_lsps - 1):+.1f}%  cpu/lock {100 * (o_cpu / b_cpu - 1):+.1f}%"
                )


if __name__ == "__main__":
    main()
