#!/usr/bin/env python3
"""Tables of bench/mirror.py's runs: python3 bench/mirror_summary.py bench/results/LABEL > report.md

Per (dataset, mode, tool): the median of the runs and [min-max] spread; then sluice / MM2 ratios
of the medians against the goals of issue #17 (3x records/s, 1/3 CPU per record, 1/10 memory).
"""
import json
import statistics
import sys
from pathlib import Path


def fmt(values, digits=0, scale=1.0):
    values = [v * scale for v in values if v is not None]
    if not values:
        return "-"
    med = statistics.median(values)
    f = f"{{:,.{digits}f}}"
    if len(values) == 1:
        return f.format(med)
    return f"{f.format(med)} [{f.format(min(values))}-{f.format(max(values))}]"


def med(rows, key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def main():
    out = Path(sys.argv[1])
    rows = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines() if line.strip()]
    thr = [r for r in rows if not r["dataset"].startswith("latency")]
    lat = [r for r in rows if r["dataset"].startswith("latency")]
    groups = {}
    for r in thr:
        groups.setdefault((r["dataset"], r["mode"], r["tool"]), []).append(r)
    print("| dataset | mode | tool | runs | records/s whole run | records/s steady | first record at s |"
          " CPU s per M records (whole) | CPU s per M (steady) | peak RSS MiB | load (1-min, start) |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for (dataset, mode, tool), rs in sorted(groups.items()):
        ok = [r for r in rs if r["records_target"] == r["records_source"] and not r["timed_out"]]
        print(f"| {dataset} | {mode} | {tool} | {len(ok)}/{len(rs)} | {fmt([r.get('whole_rps') for r in ok])} |"
              f" {fmt([r.get('steady_rps') for r in ok])} | {fmt([r.get('first_record_s') for r in ok], 1)} |"
              f" {fmt([r.get('cpu_s_per_m') for r in ok], 1)} | {fmt([r.get('steady_cpu_s_per_m') for r in ok], 1)} |"
              f" {fmt([r.get('peak_rss_mib') for r in ok])} |"
              f" {', '.join(r['load_before'].split()[0] for r in ok)} |")
    print()
    print("| dataset | mode | records/s sluice/MM2 whole (goal >= 3) | steady (goal >= 3) |"
          " CPU per record MM2/sluice whole (goal >= 3) | steady (goal >= 3) | peak RSS MM2/sluice (goal >= 10) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for dataset, mode in sorted({(d, m) for d, m, _ in groups}):
        s = [r for r in groups.get((dataset, mode, "sluice"), []) if r["records_target"] == r["records_source"] and not r["timed_out"]]
        m = [r for r in groups.get((dataset, mode, "mm2"), []) if r["records_target"] == r["records_source"] and not r["timed_out"]]
        if not s or not m:
            continue

        def ratio(a, b):
            return f"{a / b:.1f}x" if a and b else "-"
        print(f"| {dataset} | {mode} | {ratio(med(s, 'whole_rps'), med(m, 'whole_rps'))} |"
              f" {ratio(med(s, 'steady_rps'), med(m, 'steady_rps'))} |"
              f" {ratio(med(m, 'cpu_s_per_m'), med(s, 'cpu_s_per_m'))} |"
              f" {ratio(med(m, 'steady_cpu_s_per_m'), med(s, 'steady_cpu_s_per_m'))} |"
              f" {ratio(med(m, 'peak_rss_mib'), med(s, 'peak_rss_mib'))} |")
    if lat:
        print()
        print("| latency (100 B, none) | tool | rate/s | records measured | p50 ms | p99 ms | max ms | peak RSS MiB |"
              " load (1-min, start) |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for r in sorted(lat, key=lambda r: (r["mode"], r["tool"], r["run"])):
            print(f"| {r['mode']} | {r['tool']} | {r['rate']} | {r['measured']} of {r['expected']} received"
                  f" {r['received']} | {r['p50_ms']} | {r['p99_ms']} | {r['max_ms']} |"
                  f" {r.get('peak_rss_mib', 0):.0f} | {r['load_before'].split()[0]} |")


if __name__ == "__main__":
    main()
