#!/usr/bin/env python3
"""Call counts from a callgrind output file, per benchmark cycle.

callgrind_annotate reports instructions; how often a function was called
(malloc, clock_gettime, a hash) is only in the raw file's `calls=` lines.

    callgrind_calls.py FILE CYCLES [REGEX]            calls per cycle by callee
    callgrind_calls.py FILE CYCLES REGEX --callers    who calls the matching callees

CYCLES is the number of lock+unlock cycles in the run (the bench's locks
column when it ran with --warmup 0), so the output reads "calls per lock".
"""
import collections
import signal
import re
import sys


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = [a for a in sys.argv[1:] if a != "--callers"]
    callers = "--callers" in sys.argv
    if len(args) < 2:
        sys.exit(__doc__)
    path, cycles = args[0], float(args[1])
    pattern = re.compile(args[2]) if len(args) > 2 else None
    names = {}

    def resolve(token):
        # Names are compressed: "(12) name" the first time, "(12)" after.
        m = re.match(r"\((\d+)\)(?:\s+(.*))?", token)
        if not m:
            return token
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), m.group(1))

    counts = collections.Counter()
    fn = cfn = None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("fn="):
                fn = resolve(line[3:])
            elif line.startswith("cfn="):
                cfn = resolve(line[4:])
            elif line.startswith("calls=") and cfn:
                if pattern and not pattern.search(cfn):
                    continue
                n = int(line[6:].split()[0])
                counts[(fn, cfn) if callers else cfn] += n
    for key, n in counts.most_common(40):
        name = f"{key[0]}  ->  {key[1]}" if callers else key
        print(f"{n / cycles:9.2f}  {name[:180]}")


if __name__ == "__main__":
    main()
