#!/usr/bin/env python3
"""pgcpu.py SECONDS: CPU of each postgres process over SECONDS, grouped by backend type and client process."""
import os, subprocess, sys, time, re, collections
secs = float(sys.argv[1]) if len(sys.argv) > 1 else 10
url = os.environ.get("PGURL", "postgres://postgres@127.0.0.1:54329/postgres")
def pg_pids():
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit(): continue
        try:
            comm = open(f"/proc/{p}/comm").read().strip()
            if comm != "postgres": continue
            f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            out[int(p)] = int(f[11]) + int(f[12])
        except OSError: pass
    return out
def activity():
    rows = subprocess.run(["psql", "-At", "-F|", url, "-c",
        "select pid, backend_type, coalesce(client_port,0) from pg_stat_activity"],
        capture_output=True, text=True).stdout.splitlines()
    return {int(r.split("|")[0]): (r.split("|")[1], int(r.split("|")[2])) for r in rows if r}
def owners():
    out = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True).stdout
    m = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 6: continue
        local = parts[3]; who = re.search(r'users:\(\("([^"]+)",pid=(\d+)', line)
        if who: m[int(local.rsplit(":", 1)[1])] = f"{who.group(1)}[{who.group(2)}]"
    return m
a = pg_pids(); act0 = activity(); own0 = owners()
time.sleep(secs)
b = pg_pids(); act1 = activity(); own1 = owners()
act = {**act0, **act1}; own = {**own0, **own1}
groups = collections.Counter(); n = collections.Counter()
hz = os.sysconf("SC_CLK_TCK")
for pid, t1 in b.items():
    d = t1 - a.get(pid, t1)
    bt, port = act.get(pid, ("(gone or aux)", 0))
    key = f"{bt} <- {own.get(port, '-') if port else '-'}"
    groups[key] += d; n[key] += 1
tot = sum(groups.values())
for k, v in groups.most_common():
    print(f"{v/hz:8.2f} s  {n[k]:3d} procs  {k}")
print(f"{tot/hz:8.2f} s  total over {secs} s")
