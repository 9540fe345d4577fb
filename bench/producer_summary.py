#!/usr/bin/env python3
"""Summarizes a producer benchmark (bench/producer.py): reads DIR/runs.jsonl, leaves the warm-up
rounds out, and writes DIR/summary.json (medians and ratios), DIR/report.md (markdown tables) and
DIR/chart.svg; --update-benchmarks-md also writes the tables into BENCHMARKS.md's generated
producer section (between its `bench/producer.py results` markers, as bench/run.py does for
the consumer).

    python3 bench/producer_summary.py bench/results/producer-LABEL [--update-benchmarks-md]

Ratios are against the best librdkafka row of the same dataset and acks (the rdkafka crate's
producer or rdkafka_performance, whichever is better on that figure): records/s against the
faster, CPU per GiB against the cheaper, p99 latency against the lower. Standard library only.
"""

import argparse
import collections
import json
import os
import statistics
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import run as consumer_bench  # noqa: E402  (machine_info(), fmt())

GIB = float(1 << 30)
MIB = float(1 << 20)
CLIENTS = ["sluice", "rdkafka", "rdkafka-perf", "java", "franz-go", "confluent-kafka"]
LIBRDKAFKA = ["rdkafka", "rdkafka-perf"]
DATASETS = ["none-100b", "lz4-100b", "zstd-1k"]
COLORS = {"sluice": "#d62728", "rdkafka": "#1f77b4", "rdkafka-perf": "#17becf", "java": "#ff7f0e",
          "franz-go": "#2ca02c", "confluent-kafka": "#9467bd"}
BEGIN, END = "<!-- bench/producer.py results: begin -->", "<!-- bench/producer.py results: end -->"
fmt = consumer_bench.fmt


def order(client):
    return CLIENTS.index(client) if client in CLIENTS else len(CLIENTS)


def summarize(rows):
    groups = collections.defaultdict(list)
    for r in rows:
        if not r["warmup"]:
            groups[(r["mode"], r["dataset"], r["acks"], r["client"])].append(r)
    summary = []
    for (mode, dataset, acks, client), group in sorted(groups.items(), key=lambda kv: (kv[0][:3], order(kv[0][3]))):
        gib = group[0]["bytes"] / GIB
        p99 = [r["p99_ms"] for r in group if r.get("p99_ms") is not None]
        summary.append({
            "mode": mode, "dataset": dataset, "acks": acks, "client": client, "runs": len(group),
            "records": group[0]["records"], "size": group[0]["size"], "linger_ms": group[0]["linger_ms"],
            "rate": group[0]["rate"],
            "records_per_s": statistics.median(r["records_per_s"] for r in group),
            "mib_per_s": statistics.median(r["bytes"] / MIB / r["seconds"] for r in group),
            "seconds": statistics.median(r["seconds"] for r in group),
            "seconds_min": min(r["seconds"] for r in group),
            "seconds_max": max(r["seconds"] for r in group),
            "wall_s": statistics.median(r["wall_s"] for r in group),
            "client_cpu_s_per_gib": statistics.median((r["user_s"] + r["sys_s"]) / gib for r in group),
            "peak_rss_mib": max(r["max_rss_kib"] for r in group) / 1024,
            "broker_cpu_s_per_gib": statistics.median(r["broker_cpu_s"] / gib for r in group),
            "p50_ms": statistics.median(r["p50_ms"] for r in group if r.get("p50_ms") is not None) if p99 else None,
            "p99_ms": statistics.median(p99) if p99 else None,
        })
    # The best librdkafka row of the same mode, dataset and acks, figure by figure.
    for s in summary:
        refs = [t for t in summary if (t["mode"], t["dataset"], t["acks"]) == (s["mode"], s["dataset"], s["acks"])
                and t["client"] in LIBRDKAFKA]
        best_rate = max((t["records_per_s"] for t in refs), default=None)
        best_cpu = min((t["client_cpu_s_per_gib"] for t in refs if t["client_cpu_s_per_gib"] > 0), default=None)
        best_p99 = min((t["p99_ms"] for t in refs if t["p99_ms"]), default=None)
        s["throughput_vs_librdkafka"] = s["records_per_s"] / best_rate if best_rate else None
        s["cpu_vs_librdkafka"] = s["client_cpu_s_per_gib"] / best_cpu if best_cpu else None
        s["p99_vs_librdkafka"] = s["p99_ms"] / best_p99 if best_p99 and s["p99_ms"] is not None else None
    return summary


def report(summary, info, command, minutes):
    lines = [f"Run: `{command}`" + (f" ({minutes} min)" if minutes else "") + "  ",
             f"Machine: {info['cpu']}, {info['memory']}, Linux {info['kernel']}; load average at the end "
             f"{info['load_average']}.  ",
             f"Kafka {info['kafka']}; {info['rustc']}; {info['go']}; {info['java']}.  ",
             "Ratios: against the best librdkafka row (the rdkafka crate or rdkafka_performance, whichever is "
             "better on that figure).", ""]
    throughput = [s for s in summary if s["mode"] == "throughput"]
    for dataset in DATASETS:
        for acks in ("all", "leader"):
            rows = [s for s in throughput if s["dataset"] == dataset and s["acks"] == acks]
            if not rows:
                continue
            first = rows[0]
            lines.append(f"#### {dataset}, acks={acks}{' (idempotent)' if acks == 'all' else ''}: "
                         f"{first['records']:,} records of {first['size']} B, linger_ms={first['linger_ms']}, "
                         f"{first['runs']} run(s)")
            lines.append("")
            lines.append("| client | records/s | MiB/s | vs librdkafka | client CPU s/GiB | CPU vs librdkafka | "
                         "peak RSS MiB | broker CPU s/GiB | p99 ms (unpaced) | seconds median (min-max) |")
            lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for s in rows:
                lines.append(
                    f"| {s['client']} | {fmt(s['records_per_s'])} | {fmt(s['mib_per_s'], 1)} | "
                    f"{fmt(s['throughput_vs_librdkafka'], 2)} | {fmt(s['client_cpu_s_per_gib'], 1)} | "
                    f"{fmt(s['cpu_vs_librdkafka'], 2)} | {fmt(s['peak_rss_mib'])} | {fmt(s['broker_cpu_s_per_gib'], 1)} | "
                    f"{fmt(s['p99_ms'], 1)} | {s['seconds']:.3f} ({s['seconds_min']:.3f}-{s['seconds_max']:.3f}) |")
            lines.append("")
    latency = [s for s in summary if s["mode"] == "latency"]
    if latency:
        first = latency[0]
        lines.append(f"#### Send-to-acknowledgement latency: {first['rate']:,} records/s for "
                     f"{first['records'] / first['rate']:.0f} s, {first['size']} B, none, acks=all (idempotent), "
                     f"linger_ms=0, {first['runs']} run(s)")
        lines.append("")
        lines.append("| client | p50 ms | p99 ms | p99 vs librdkafka | records/s achieved | client CPU s/GiB | peak RSS MiB |")
        lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for s in latency:
            lines.append(f"| {s['client']} | {fmt(s['p50_ms'], 2)} | {fmt(s['p99_ms'], 2)} | "
                         f"{fmt(s['p99_vs_librdkafka'], 2)} | {fmt(s['records_per_s'])} | "
                         f"{fmt(s['client_cpu_s_per_gib'], 1)} | {fmt(s['peak_rss_mib'])} |")
        lines.append("")
    return "\n".join(lines)


def chart(summary, title):
    """Horizontal bars, one group per dataset and acks: median records/s; then a group of the
    latency runs' median p99 (ms, shorter is better) on its own scale."""
    groups = []
    for dataset in DATASETS:
        for acks in ("all", "leader"):
            rows = [s for s in summary if s["mode"] == "throughput" and s["dataset"] == dataset and s["acks"] == acks]
            if rows:
                groups.append((f"{dataset}, acks={acks}: records/s", rows, "records_per_s", lambda v: f"{v:,.0f} rec/s"))
    latency = [s for s in summary if s["mode"] == "latency" and s["p99_ms"] is not None]
    if latency:
        groups.append((f"p99 send-to-ack latency at {latency[0]['rate']:,} rec/s, linger 0 (shorter is better)",
                       latency, "p99_ms", lambda v: f"{v:.2f} ms"))
    if not groups:
        return "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'/>"
    bar, gap, left, width, top = 16, 18, 130, 500, 40
    height = top + sum(len(rows) * bar + gap + 18 for _, rows, _, _ in groups) + 10
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{left + width + 160}' height='{height}' "
           "font-family='sans-serif' font-size='12'>",
           "<rect width='100%' height='100%' fill='white'/>",
           f"<text x='10' y='20' font-size='14' font-weight='bold'>{title}</text>"]
    y = top
    for label, rows, key, text in groups:
        peak = max(s[key] for s in rows) or 1
        out.append(f"<text x='10' y='{y + 12}' font-weight='bold'>{label}</text>")
        y += 18
        for s in rows:
            w = max(1.0, s[key] / peak * width)
            out.append(f"<text x='{left - 6}' y='{y + 12}' text-anchor='end'>{s['client']}</text>")
            out.append(f"<rect x='{left}' y='{y + 1}' width='{w:.1f}' height='{bar - 3}' fill='{COLORS.get(s['client'], '#777')}'/>")
            out.append(f"<text x='{left + w + 4:.1f}' y='{y + 12}'>{text(s[key])}</text>")
            y += bar
        y += gap
    out.append("</svg>")
    return "\n".join(out)


def update_benchmarks_md(text):
    path = os.path.join(ROOT, "BENCHMARKS.md")
    with open(path) as f:
        current = f.read()
    if BEGIN not in current or END not in current:
        raise SystemExit(f"BENCHMARKS.md has no '{BEGIN}' ... '{END}' markers")
    head, rest = current.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + text + "\n" + END + tail)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="bench/results/producer-LABEL (holds runs.jsonl)")
    parser.add_argument("--command", default=None, help="the command line that made the runs (for the report)")
    parser.add_argument("--minutes", default=None)
    parser.add_argument("--update-benchmarks-md", action="store_true")
    args = parser.parse_args()
    with open(os.path.join(args.dir, "runs.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        raise SystemExit(f"{args.dir}/runs.jsonl holds no runs")
    summary = summarize(rows)
    info = consumer_bench.machine_info()
    with open(os.path.join(args.dir, "summary.json"), "w") as f:
        json.dump({"machine": info, "command": args.command, "minutes": args.minutes, "summary": summary}, f, indent=1)
    measured = max((s["runs"] for s in summary), default=0)
    with open(os.path.join(args.dir, "chart.svg"), "w") as f:
        f.write(chart(summary, f"Producer: median of {measured} run(s) per client"))
    chart_path = os.path.relpath(os.path.join(args.dir, "chart.svg"), ROOT)
    text = f"![producer chart]({chart_path})\n\n" + report(summary, info, args.command or "?", args.minutes)
    with open(os.path.join(args.dir, "report.md"), "w") as f:
        f.write(text + "\n")
    if args.update_benchmarks_md:
        update_benchmarks_md(text)
    print(text)


if __name__ == "__main__":
    main()
