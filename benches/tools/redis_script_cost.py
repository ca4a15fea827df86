#!/usr/bin/env python3
"""Redis time per lock+unlock of RedisLocker's Lua scripts, beside Redlock's.

Starts a redis-server of its own on 127.0.0.1 (free port, no persistence),
loads the scripts of src/redis/scripts.rs the way RedisLocker builds them
(PRELUDE + body), pipelines lock+unlock cycles on distinct keys, and reads
INFO commandstats: the microseconds Redis spent executing each command,
which is the server-side cost without networking. The server is killed by
its PID at the end.

    redis_script_cost.py [CYCLES]          default 20000, at most 200000

Cases:
  ours LOCK+UNLOCK          a polling round and its release, free key
  ours WAIT+UNLOCK          a push-mode wait granted at once, and release
  ours WAIT queued, line K  a waiter joining a line of K places behind a
                            holder, and leaving it (what every call on a
                            contended key costs as the line grows)
  redlock SET NX + unlock   rslock's and the SET NX baseline's pair
"""
import os
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "src", "redis", "scripts.rs")
REDLOCK_UNLOCK = """
if redis.call("get", KEYS[1]) == ARGV[1] then
  return redis.call("del", KEYS[1])
else
  return 0
end"""
OWNER, SOURCE, VALIDITY = "bench-host:4242", "redis_script_cost.py", 60000
CHANNEL = "quorum-lock:~push:0123456789abcdef"
BATCH = 2000


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("redis-server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("redis-server closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *args):
        self.sock.sendall(encode(*args))
        return self.reply()

    def pipeline(self, commands):
        """Sends commands in batches; returns the replies."""
        replies = []
        for i in range(0, len(commands), BATCH):
            batch = commands[i:i + BATCH]
            self.sock.sendall(b"".join(batch))
            replies.extend(self.reply() for _ in batch)
        return replies


def load_scripts():
    text = open(SCRIPTS).read()
    consts = dict(re.findall(r'const (\w+): &str = r#"(.*?)"#;', text, re.S))
    prelude = consts["PRELUDE"]
    return {name: prelude + "\n" + consts[name] for name in ("LOCK", "WAIT", "UNLOCK")}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server():
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
         "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    give_up = time.monotonic() + 5
    while time.monotonic() < give_up:
        if proc.poll() is not None:
            raise RuntimeError("redis-server exited with %s" % proc.returncode)
        try:
            conn = Conn(port)
            if conn.call("PING") == "PONG":
                return proc, conn
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not answer on port %d" % port)


def commandstats(conn):
    stats = {}
    for line in conn.call("INFO", "commandstats").splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, fields = line[len("cmdstat_"):].split(":", 1)
        f = dict(kv.split("=") for kv in fields.split(","))
        stats[name] = (int(f["calls"]), int(f["usec"]))
    return stats


def measure(conn, label, cycles, commands, inner):
    conn.call("CONFIG", "RESETSTAT")
    replies = conn.pipeline(commands)
    stats = commandstats(conn)
    stats.pop("config|resetstat", None)
    top = {k: v for k, v in stats.items() if k not in inner}
    usec = sum(u for _, u in top.values())
    calls = sum(c for c, _ in top.values())
    executed = sum(c for c, _ in stats.values())
    print("%-34s %8.2f us  %5.2f commands sent  %6.2f executed   %s" % (
        label, usec / cycles, calls / cycles, executed / cycles,
        ", ".join("%s %.2f" % (k, c / cycles) for k, (c, _) in sorted(stats.items()))))
    return replies


def ticket(n):
    return "%020d%020d" % (n, 0)


def main():
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    if not 1 <= cycles <= 200000:
        sys.exit("CYCLES must be from 1 to 200000")
    scripts = load_scripts()
    proc, conn = start_server()
    try:
        sha = {name: conn.call("SCRIPT", "LOAD", body) for name, body in scripts.items()}
        sha["REDLOCK"] = conn.call("SCRIPT", "LOAD", REDLOCK_UNLOCK)
        ours_inner = {"time", "hgetall", "hset", "hdel", "del", "pexpire", "publish"}
        print("Redis time (commandstats usec of the commands sent) per lock+unlock, one node,"
              " %d cycles, %s" % (cycles, conn.call("INFO", "server").split("redis_version:")[1].split()[0]))

        cmds = []
        for i in range(cycles):
            key, uid = "cost:lock:%d" % i, "uid-%d" % i
            cmds.append(encode("EVALSHA", sha["LOCK"], 1, key, uid, "w", VALIDITY, OWNER, SOURCE, 0))
            cmds.append(encode("EVALSHA", sha["UNLOCK"], 1, key, uid, "w"))
        measure(conn, "ours LOCK+UNLOCK", cycles, cmds, ours_inner)

        cmds = []
        for i in range(cycles):
            key, uid = "cost:wait:%d" % i, "uid-%d" % i
            cmds.append(encode("EVALSHA", sha["WAIT"], 1, key, uid, "w", VALIDITY, OWNER, SOURCE, 0,
                               ticket(i), 3000, CHANNEL, 0))
            cmds.append(encode("EVALSHA", sha["UNLOCK"], 1, key, uid, "w"))
        measure(conn, "ours WAIT+UNLOCK", cycles, cmds, ours_inner)

        for line in (0, 16, 64, 256):
            key = "cost:line:%d" % line
            conn.call("EVALSHA", sha["LOCK"], 1, key, "holder", "w", VALIDITY, OWNER, SOURCE, 0)
            setup = [encode("EVALSHA", sha["WAIT"], 1, key, "place-%d" % p, "w", VALIDITY, OWNER,
                            SOURCE, 0, ticket(p + 1), VALIDITY, CHANNEL, 0) for p in range(line)]
            conn.pipeline(setup)
            n = max(1, cycles // (1 + line // 16))
            cmds = []
            for i in range(n):
                uid = "joiner-%d" % i
                cmds.append(encode("EVALSHA", sha["WAIT"], 1, key, uid, "w", VALIDITY, OWNER, SOURCE,
                                   0, ticket(10**9 + i), VALIDITY, CHANNEL, 0))
                cmds.append(encode("EVALSHA", sha["UNLOCK"], 1, key, uid, "w"))
            replies = measure(conn, "ours WAIT queued+UNLOCK, line %d" % line, n, cmds, ours_inner)
            if replies and replies[0] != 2:
                print("   (unexpected: the joiner was answered %r, not queued)" % replies[0])

        cmds = []
        for i in range(cycles):
            key, val = "cost:redlock:%d" % i, "v-%d" % i
            cmds.append(encode("SET", key, val, "NX", "PX", VALIDITY))
            cmds.append(encode("EVALSHA", sha["REDLOCK"], 1, key, val))
        measure(conn, "redlock SET NX PX + unlock script", cycles, cmds, {"get", "del"})
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
