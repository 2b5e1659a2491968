#!/usr/bin/env python3
"""Runs the workspace's test binaries, built once by `cargo test --no-run`, two at a time.

Most of the suite's time is waiting (servers, elections, timeouts), so two binaries beside each
other finish in about half the time on two cores. What must not run beside each other shares a
group, and a binary waits while another of its group runs:

- `private-kafka`: binaries that start a Kafka cluster of their own (JVMs that take a core for
  their first seconds, on ports picked free just before);
- `bench`: the bench's suites, which share its own Postgres cluster's port and switch the shared
  server's autovacuum;
- `leases`: scale_out, whose Rink members hold 1 s leases, and operations, which loads the
  machine (a Kafka JVM, Prometheus, a reaper under a steady writer): beside it a member once
  missed its keep-alive and lost its buckets.

Each binary's output is printed whole when it ends, headed as cargo heads it, so that
scripts/test/test-summary.sh reads the log as it reads cargo's.

    scripts/test/test-run.py PLAN [-- ARGS...]

PLAN: the JSON lines of `cargo test --no-run --message-format=json`. ARGS go to every binary.
Environment: HARVEST_TEST_LANES (binaries at once, default 2), RUST_TEST_THREADS (each binary's
test threads), HARVEST_IT_THREADS (the harvester's `it`, whose tests may run beside each other).
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

GROUPS = {
    "private-kafka": {
        "real_broker", "fencing", "neli_faults", "cluster_faults", "versus", "operations",
    },
    "leases": {"scale_out", "operations"},
}
# Package-wide groups.
PACKAGE_GROUPS = {"bench": "bench"}
# The longest first (seconds two at a time at ce39aba), so the end is not one long binary alone.
FIRST = [
    "scenarios", "fencing", "operations", "scale_out", "warm_kafka", "it", "conformance",
    "election", "cluster_faults", "assign_neli", "real_broker", "least_privilege", "versus",
    "neli_faults", "round_trip", "assign", "mock_broker", "reaper", "mariadb", "handoff", "secured",
]


class Binary:
    def __init__(self, msg):
        target = msg["target"]
        self.name = target["name"]
        self.kind = target["kind"][0]
        self.exe = msg["executable"]
        self.package_dir = os.path.dirname(msg["manifest_path"])
        self.package = package_name(msg["package_id"])
        src = os.path.relpath(target["src_path"], self.package_dir)
        unit = self.kind in ("lib", "bin", "example", "proc-macro")
        self.header = f"{'unittests ' if unit else ''}{src}"
        self.groups = {g for g, names in GROUPS.items() if self.kind == "test" and self.name in names}
        if self.kind in ("test", "bench") and self.package in PACKAGE_GROUPS:
            self.groups.add(PACKAGE_GROUPS[self.package])

    def rank(self):
        if self.kind == "test" and self.name in FIRST:
            return FIRST.index(self.name)
        return len(FIRST)

    def rerun(self):
        flag = {"lib": "--lib", "test": f"--test {self.name}", "bench": f"--bench {self.name}",
                "example": f"--example {self.name}"}.get(self.kind, f"--bin {self.name}")
        return f"-p {self.package} {flag}"


def package_name(pkgid):
    """`path+file:///work/main/bench#0.1.0` (or `...#name@0.1.0` where the folder is named
    otherwise), or the older `bench 0.1.0 (path+file:///work/main/bench)`."""
    if "#" in pkgid:
        path, frag = pkgid.split("#", 1)
        return frag.split("@")[0] if "@" in frag else path.rstrip("/").split("/")[-1]
    return pkgid.split(" ")[0]


def plan(path):
    seen, out = set(), []
    with open(path) as f:
        for line in f:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
                continue
            if not msg.get("profile", {}).get("test"):
                continue
            if msg["executable"] in seen:
                continue
            seen.add(msg["executable"])
            out.append(Binary(msg))
    return sorted(out, key=Binary.rank)


class Runner:
    def __init__(self, binaries, args, root):
        self.pending = list(binaries)
        self.busy = set()
        self.cond = threading.Condition()
        self.args, self.root = args, root
        self.failed = []
        self.print_lock = threading.Lock()
        self.start = time.monotonic()

    def take(self):
        with self.cond:
            while True:
                if not self.pending:
                    return None
                for i, b in enumerate(self.pending):
                    if not (b.groups & self.busy):
                        self.busy |= b.groups
                        return self.pending.pop(i)
                self.cond.wait()

    def done(self, b):
        with self.cond:
            self.busy -= b.groups
            self.cond.notify_all()

    def lane(self):
        while (b := self.take()) is not None:
            try:
                self.run(b)
            finally:
                self.done(b)

    def run(self, b):
        env = dict(os.environ)
        env["CARGO_MANIFEST_DIR"] = b.package_dir
        env["CARGO_PKG_NAME"] = b.package
        if b.kind == "test" and b.name == "it":
            env["RUST_TEST_THREADS"] = os.environ.get("HARVEST_IT_THREADS", "4")
        t0 = time.monotonic()
        with self.print_lock:
            print(f"== [{self.elapsed()}] started {b.rerun()}", flush=True)
        try:
            with tempfile.TemporaryFile() as out:
                rc = subprocess.call([b.exe, *self.args], cwd=b.package_dir, env=env,
                                     stdout=out, stderr=subprocess.STDOUT)
                out.seek(0)
                text = out.read().decode("utf-8", "replace")
        except OSError as e:
            # A binary that cannot be started is a failure, never a binary left out.
            rc, text = 1, f"test-run: cannot run {b.exe}: {e}\n"
        exe = os.path.relpath(b.exe, self.root)
        with self.print_lock:
            print(f"     Running {b.header} ({exe})", flush=True)
            sys.stdout.write(text)
            if text and not text.endswith("\n"):
                sys.stdout.write("\n")
            if rc != 0:
                self.failed.append(b)
                print(f"error: test failed, to rerun pass `{b.rerun()}` (exit {rc})")
            print(f"== [{self.elapsed()}] {b.rerun()}: {'ok' if rc == 0 else 'FAILED'} "
                  f"in {time.monotonic() - t0:.1f} s", flush=True)

    def elapsed(self):
        s = int(time.monotonic() - self.start)
        return f"{s // 60} min {s % 60:02d} s"


def main():
    argv = sys.argv[1:]
    args = argv[argv.index("--") + 1:] if "--" in argv else []
    binaries = plan(argv[0])
    if not binaries:
        print("test-run: no test binaries in the plan", file=sys.stderr)
        return 1
    root = os.getcwd()
    runner = Runner(binaries, args, root)
    lanes = max(1, int(os.environ.get("HARVEST_TEST_LANES", "2")))
    print(f"== test-run: {len(binaries)} binaries, {lanes} at a time", flush=True)
    threads = [threading.Thread(target=runner.lane) for _ in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if runner.failed:
        print(f"error: {len(runner.failed)} targets failed:")
        for b in runner.failed:
            print(f"    `{b.rerun()}`")
        return 101
    return 0


if __name__ == "__main__":
    sys.exit(main())
