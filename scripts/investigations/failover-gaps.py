#!/usr/bin/env python3
"""Failover gaps as a new user meets them: three `reaper` processes of one group, one fault.

    scripts/investigations/failover-gaps.py [--broker real|mock] [--kind neli|neli_buckets]
                             [--heartbeat 3s] [--fault kill|stop|term] [--runs N]

Needs `scripts/services.sh up` (reads .state/services.env) and a built reaper
(`cargo build -p harvester --features cli --bin reaper`; REAPER=path to use another). For
`neli` the gap is from the fault (SIGKILL, SIGSTOP or SIGTERM of the leader) until another
member's `/leader` answers 200; for `neli_buckets`, from the fault on one member until the other
two own all 64 buckets (`/buckets`), polled every 50 ms. Prints one line per run and a JSON line
of the gaps in seconds. On the mock (`--broker mock`) the leader topic is created through the
embedded broker's control port: the mock has no CreateTopics.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STATE = os.environ.get("HARVEST_STATE_DIR", os.path.join(ROOT, ".state"))
BUCKETS = 64


def services_env():
    env = {}
    with open(os.path.join(STATE, "services.env")) as f:
        for line in f:
            if line.startswith("export ") and "=" in line:
                k, v = line[len("export "):].strip().split("=", 1)
                env[k] = v
    return env


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=0.5) as r:
            return r.status, r.read()
    except Exception:
        return None, b""


def leads(port):
    return get(port, "/leader")[0] == 200


def owned(port):
    status, body = get(port, "/buckets")
    return set(json.loads(body)["owned"]) if status == 200 else set()


def mock_topic(name, partitions):
    with open(os.path.join(STATE, "broker", "broker.json")) as f:
        host, port = json.load(f)["control"].rsplit(":", 1)
    with socket.create_connection((host, int(port))) as s:
        s.sendall((json.dumps({"cluster": 0, "op": "create_topic", "name": name,
                               "partitions": partitions}) + "\n").encode())
        s.recv(1000)


def config(args, env, group, port):
    bootstrap = env["KAFKA_BROKERS"] if args.broker == "real" else env["HARVEST_EMBEDDED_BOOTSTRAP"]
    return f'''[kafka]
"bootstrap.servers" = "{bootstrap}"
[database]
url = "{env["DATABASE_URL"]}"
[outbox]
table = "failover_gaps.outbox"
[leader]
kind = "{args.kind}"
group_id = "{group}"
heartbeat_timeout = "{args.heartbeat}"
[http]
listen = "127.0.0.1:{port}"
'''


def settled(args, ports):
    if args.kind == "neli":
        return any(leads(p) for p in ports)
    sets = [owned(p) for p in ports]
    return all(sets) and len(set().union(*sets)) == BUCKETS


def recovered(args, ports, victim):
    others = [p for p in ports if p != victim]
    if args.kind == "neli":
        return any(leads(p) for p in others)
    return len(set().union(*[owned(p) for p in others])) == BUCKETS


def wait(condition, bound):
    start = time.time()
    while time.time() - start < bound:
        if condition():
            return time.time() - start
        time.sleep(0.05)
    return None


def one_run(args, env, n):
    group = f"gaps-{os.getpid()}-{n}-{int(time.time())}"
    if args.broker == "mock":
        mock_topic(f"{group}.neli-buckets" if args.kind == "neli_buckets" else f"{group}.neli",
                   BUCKETS if args.kind == "neli_buckets" else 1)
    ports = [args.port + i for i in range(3)]
    procs, files = [], []
    try:
        for port in ports:
            path = os.path.join(STATE, f"{group}-{port}.toml")
            with open(path, "w") as f:
                f.write(config(args, env, group, port))
            files.append(path)
            log = open(os.path.join(STATE, f"{group}-{port}.log"), "w")
            procs.append(subprocess.Popen([args.reaper, "--config", path], stdout=log,
                                          stderr=subprocess.STDOUT))
        if wait(lambda: settled(args, ports), 90) is None:
            return None, "never settled"
        time.sleep(3)
        if args.kind == "neli":
            victim = next((p for p in ports if leads(p)), None)
        else:
            victim = ports[0]
        if victim is None:
            return None, "no leader"
        sig = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP, "term": signal.SIGTERM}[args.fault]
        procs[ports.index(victim)].send_signal(sig)
        gap = wait(lambda: recovered(args, ports, victim), 120)
        return gap, "ok" if gap is not None else "no successor within 120 s"
    finally:
        for p in procs:
            try:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
            except Exception:
                pass
        for path in files:
            os.remove(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker", choices=["real", "mock"], default="real")
    ap.add_argument("--kind", choices=["neli", "neli_buckets"], default="neli")
    ap.add_argument("--heartbeat", default="3s")
    ap.add_argument("--fault", choices=["kill", "stop", "term"], default="kill")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--port", type=int, default=9301)
    ap.add_argument("--reaper", default=os.environ.get(
        "REAPER", os.path.join(ROOT, "target", "debug", "reaper")))
    args = ap.parse_args()
    env = services_env()
    subprocess.run(["psql", env["DATABASE_URL"], "-qc",
                    "CREATE SCHEMA IF NOT EXISTS failover_gaps"], check=True)
    gaps = []
    for n in range(args.runs):
        gap, why = one_run(args, env, n)
        print(f"{args.broker} {args.kind} heartbeat {args.heartbeat} {args.fault}: "
              + (f"{gap:.2f} s" if gap is not None else why), flush=True)
        gaps.append(gap)
    print(json.dumps({"broker": args.broker, "kind": args.kind, "heartbeat": args.heartbeat,
                      "fault": args.fault, "gaps_s": gaps}))
    return 0 if all(g is not None for g in gaps) else 1


if __name__ == "__main__":
    sys.exit(main())
