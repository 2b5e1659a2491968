#!/usr/bin/env python3
"""Render one trace as Jaeger's query API returns it (GET /api/traces/{id}) to an SVG picture.

    scripts/investigations/trace-svg.py docs/tracing/trace.json docs/tracing/trace.svg

Each span is a bar on a common time axis (milliseconds from the trace's first span), indented
under its parent, coloured by service; its events are ticks on the bar, named above it; the
line under its name shows the attributes a reader looks for first (partition, offset, row id,
attempt, the error). Standard library only.
"""
import json
import sys
from html import escape

KEY_ATTRIBUTES = [
    ("messaging.destination.partition.id", "partition"),
    ("messaging.kafka.offset", "offset"),
    ("outbox.id", "row"),
    ("outbox.attempt", "attempt"),
    ("outbox.commit_to_marked_ms", "commit→marked ms"),
    ("outbox.sent_to_acked_ms", "sent→acked ms"),
    ("outbox.acked_to_purged_ms", "acked→purged ms"),
    ("error", "error"),
]
COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2"]
WIDTH, LABELS, ROW, TOP, PAD, RIGHT = 1100, 430, 66, 60, 20, 70


def load(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    if not data:
        sys.exit(f"{path}: no trace in it")
    return data[0]


def tags(span):
    return {t["key"]: t["value"] for t in span.get("tags", [])}


def ordered(spans):
    """Spans depth first, each child after its parent, siblings by start time; with depth."""
    ids = {s["spanID"] for s in spans}
    children = {}
    roots = []
    for s in spans:
        parents = [r["spanID"] for r in s.get("references", []) if r.get("refType") == "CHILD_OF"]
        parent = next((p for p in parents if p in ids), None)
        (children.setdefault(parent, []) if parent else roots).append(s)
    out = []

    def walk(span, depth):
        out.append((span, depth))
        for c in sorted(children.get(span["spanID"], []), key=lambda s: (s["startTime"], tags(s).get("outbox.id", 0))):
            walk(c, depth + 1)

    for r in sorted(roots, key=lambda s: s["startTime"]):
        walk(r, 0)
    return out


def nice_step(span_ms):
    for step in [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]:
        if span_ms / step <= 10:
            return step
    return 10000


def fmt_value(v):
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def render(trace):
    spans = ordered(trace["spans"])
    start = min(s["startTime"] for s, _ in spans)
    end = max(s["startTime"] + s["duration"] for s, _ in spans)
    total_ms = max((end - start) / 1000.0, 0.001)
    bar_w = WIDTH - LABELS - RIGHT

    def x(us):
        return LABELS + (us - start) / 1000.0 / total_ms * bar_w

    services = {}
    for pid, p in trace["processes"].items():
        services[pid] = (p["serviceName"], COLOURS[len(services) % len(COLOURS)])
    height = TOP + ROW * len(spans) + PAD
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{PAD}" y="20" font-size="14" font-weight="bold">trace {escape(trace["traceID"])}'
        f' — {len(spans)} spans, {total_ms:.1f} ms</text>',
    ]
    step = nice_step(total_ms)
    t = 0.0
    while t <= total_ms + 1e-9:
        tx = LABELS + t / total_ms * bar_w
        out.append(f'<line x1="{tx:.1f}" y1="{TOP - 12}" x2="{tx:.1f}" y2="{height - PAD}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{tx:.1f}" y="{TOP - 16}" text-anchor="middle" fill="#666">{t:g} ms</text>')
        t += step
    for i, (span, depth) in enumerate(spans):
        y = TOP + i * ROW
        name, colour = services.get(span["processID"], ("?", "#999"))
        t = tags(span)
        failed = t.get("error") in (True, "true") or t.get("otel.status_code") == "ERROR"
        indent = PAD + depth * 18
        out.append(f'<text x="{indent}" y="{y + 16}" font-weight="bold">{escape(span["operationName"])}</text>')
        out.append(f'<text x="{indent}" y="{y + 31}" fill="{colour}">{escape(name)}'
                   f' · {escape(str(t.get("span.kind", "")))}</text>')
        attrs = [f"{label} {fmt_value(t[k])}" for k, label in KEY_ATTRIBUTES if k in t]
        if attrs:
            out.append(f'<text x="{indent}" y="{y + 46}" fill="#444" font-size="11">{escape(", ".join(attrs))}</text>')
        x0 = x(span["startTime"])
        w = max(x(span["startTime"] + span["duration"]) - x0, 2)
        out.append(f'<rect x="{x0:.1f}" y="{y + 22}" width="{w:.1f}" height="14" rx="2" '
                   f'fill="{colour}" stroke="{"#c00" if failed else "none"}" stroke-width="2"/>')
        out.append(f'<text x="{x0 + w + 4:.1f}" y="{y + 33}" fill="#444" font-size="11">'
                   f'{span["duration"] / 1000.0:.1f} ms</text>')
        # Events at one instant share a label; a label that would run into the one before it
        # goes on the line above.
        labelled = []
        for log in span.get("logs", []):
            ev = next((f["value"] for f in log.get("fields", []) if f["key"] == "event"), "event")
            lx = x(log["timestamp"])
            out.append(f'<line x1="{lx:.1f}" y1="{y + 19}" x2="{lx:.1f}" y2="{y + 39}" stroke="black"/>')
            if labelled and abs(lx - labelled[-1][0]) < 1:
                labelled[-1][1].append(ev)
            else:
                labelled.append((lx, [ev]))
        ends = [-1e9, -1e9]
        for lx, evs in labelled:
            text = "+".join(evs)
            level = 0 if lx >= ends[0] + 4 else 1
            ends[level] = lx + 5.6 * len(text)
            ly = y + 16 - 11 * level
            anchor = "end" if lx + 5.6 * len(text) > WIDTH - 4 else "start"
            out.append(f'<text x="{lx:.1f}" y="{ly}" font-size="10" fill="#222" text-anchor="{anchor}">{escape(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    svg = render(load(sys.argv[1]))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
