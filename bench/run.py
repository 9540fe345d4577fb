#!/usr/bin/env python3
"""The consumer benchmark of issue #6: one command that builds every client, writes the fixed
datasets into the local broker through Sluice's producer, consumes each dataset with every client
in alternating runs, and reports medians and ratios against librdkafka measured in the same run.

    python3 bench/run.py                      # full scale: 5 runs per client after a warm-up pass
    python3 bench/run.py --scale 0.02 --runs 3 --label smoke

See bench/README.md for what is measured and how; BENCHMARKS.md for results. Only the standard
library is used (the chart is a hand-written SVG).
"""

import argparse
import csv
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
BROKER_PID_FILE = os.path.join(ROOT, ".kafka", "single", "broker.pid")
CLK_TCK = os.sysconf("SC_CLK_TCK")
GIB = float(1 << 30)
MIB = float(1 << 20)

# name, partitions, records at scale 1, value kind, codec, records per batch
DATASETS = [
    ("plain-100b", 1, 5_000_000, "text100", "none", 1000),
    ("lz4-100b", 4, 5_000_000, "text100", "lz4", 1000),
    ("zstd-1k", 4, 1_000_000, "text1k", "zstd", 100),
    ("json-200b", 4, 2_000_000, "json200", "none", 500),
]
# The consumer comparison runs on the first three; json-200b is the connector's dataset.
CONSUMER_DATASETS = ["plain-100b", "lz4-100b", "zstd-1k"]
CONNECTOR_DATASET = "json-200b"


def binaries():
    """name -> (command prefix taking BOOTSTRAP TOPIC PARTITIONS RECORDS, path that must exist)."""
    sluice = os.path.join(BENCH, "sluice", "target", "release", "sluice-consume")
    rdkafka = os.path.join(BENCH, "peers", "rdkafka", "target", "release", "bench-peer-rdkafka")
    rskafka = os.path.join(BENCH, "peers", "rskafka", "target", "release", "bench-peer-rskafka")
    krafka = os.path.join(BENCH, "peers", "krafka", "target", "release", "bench-peer-krafka")
    franz = os.path.join(BENCH, "peers", "franz-go", "bench-peer-franz-go")
    java = os.path.join(BENCH, "peers", "java", "consumer-perf.sh")
    confluent = os.path.join(BENCH, "peers", "confluent-kafka", "target", "release", "bench-peer-confluent-kafka")
    perf = os.path.join(BENCH, "peers", "rdkafka-perf", "consume.sh")
    perf_binary = os.path.join(BENCH, "peers", "rdkafka-perf", "build", "librdkafka", "examples", "rdkafka_performance")
    return {
        "sluice": ([sluice], sluice),
        "librdkafka": ([rdkafka], rdkafka),
        "librdkafka-crc": ([rdkafka], rdkafka),
        "librdkafka-q1m": ([rdkafka], rdkafka),
        "java": ([java], java),
        "franz-go": ([franz], franz),
        "rskafka": ([rskafka], rskafka),
        "krafka": ([krafka], krafka),
        "confluent-kafka": ([confluent, "consume"], confluent),
        "rdkafka-perf": ([perf], perf_binary),
    }


ALL_CLIENTS = ["sluice", "librdkafka", "librdkafka-crc", "librdkafka-q1m", "rdkafka-perf", "java", "franz-go",
               "confluent-kafka", "rskafka", "krafka"]
# The librdkafka rows: ratios are against the best of them on each figure (the fastest for
# throughput, the cheapest for CPU), not against its defaults or the slowest.
LIBRDKAFKA_CLIENTS = ["librdkafka", "librdkafka-crc", "librdkafka-q1m", "rdkafka-perf"]
# librdkafka properties given after the arguments (librdkafka rows other than its defaults).
EXTRA_ARGS = {
    "librdkafka-crc": ["check.crcs=true"],
    # librdkafka stops fetching a partition for fetch.queue.backoff.ms (1 s) whenever 100,000
    # messages wait in its local queue (queued.min.messages): with 100-byte records that throttles
    # it. This row raises the threshold, the usual throughput setting.
    "librdkafka-q1m": ["queued.min.messages=1000000"],
}


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(command, **kwargs):
    log("$ " + " ".join(command))
    subprocess.run(command, check=True, **kwargs)


# ------------------------------------------------------------------------------------------------
# Builds


def build(clients, connector):
    cargo = ["cargo", "build", "--release", "--quiet"]
    run(cargo + ["--bins"], cwd=os.path.join(BENCH, "sluice"))
    if any(c.startswith("librdkafka") for c in clients) or "rdkafka-perf" in clients:
        # rdkafka-perf's build takes its zstd from this peer's zstd-sys build.
        run(cargo, cwd=os.path.join(BENCH, "peers", "rdkafka"))
    if "rdkafka-perf" in clients:
        # librdkafka's own rdkafka_performance, from the sources rdkafka-sys bundles.
        run([os.path.join(BENCH, "peers", "rdkafka-perf", "build.sh")])
    if "confluent-kafka" in clients:
        # Its rust-toolchain.toml selects Rust 1.95 (the crate's minimum).
        run(cargo, cwd=os.path.join(BENCH, "peers", "confluent-kafka"))
    for crate in ("rskafka", "krafka"):
        if crate in clients:
            run(cargo, cwd=os.path.join(BENCH, "peers", crate))
    if "franz-go" in clients:
        run(["go", "build", "-o", "bench-peer-franz-go", "."], cwd=os.path.join(BENCH, "peers", "franz-go"))
    if "java" in clients:
        run([os.path.join(ROOT, "tests", "kafka", "broker.sh"), "fetch"])
    if connector:
        # Its own target directory: the workspace's target/ is shared with test builds.
        run(cargo + ["-p", "sluice", "--bin", "sluice", "--target-dir", os.path.join(BENCH, "target")], cwd=ROOT)
        if shutil.which("kcat") is None:
            raise SystemExit("kcat not found: apt-get install kcat (Debian's package), or leave the connector "
                             "section out (--sections consumer,decode)")


# ------------------------------------------------------------------------------------------------
# Measurement


def broker_pid():
    try:
        with open(BROKER_PID_FILE) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        raise SystemExit("the local broker is not running: tests/kafka/broker.sh start")


def process_cpu_seconds(pid):
    """user + system CPU seconds of a live process (all its threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime field 14, stime field 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def measure(command, cpu=None, stdout_path=None, timeout=900):
    """Runs command (under taskset when cpu is given) and returns its wall time, CPU (user, system)
    from wait4 (microseconds; the process and the descendants it waited for: the JVM under the Java
    wrapper), peak RSS from /usr/bin/time, its stdout, and the broker's CPU seconds over the same
    span. A client still running after `timeout` seconds (a broker that went away mid-run) is
    killed and the run fails.

    Peak RSS comes from /usr/bin/time because a process's peak RSS starts at the peak of the
    image it was exec'ed from: measured from here it would never read below this Python's
    ~17 MiB, while /usr/bin/time's own image is ~2 MiB."""
    pid = broker_pid()
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss, \
            tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as captured:
        full = ["/usr/bin/time", "-f", "%M", "-o", rss.name]
        full += (["taskset", "-c", str(cpu)] if cpu is not None else []) + command
        out = open(stdout_path, "wb") if stdout_path else captured
        broker_before = process_cpu_seconds(pid)
        started = time.monotonic()
        try:
            child = subprocess.Popen(full, stdout=out, stderr=err, start_new_session=True)
            watchdog = threading.Timer(timeout, kill_group, (child.pid,))
            watchdog.start()
            try:
                _, status, usage = os.wait4(child.pid, 0)
            finally:
                watchdog.cancel()
            child.returncode = os.waitstatus_to_exitcode(status)
        finally:
            if stdout_path:
                out.close()
        wall = time.monotonic() - started
        if broker_pid() != pid:
            raise RuntimeError("the broker was restarted during the run (its data with it): start again")
        broker_after = process_cpu_seconds(pid)
        if child.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(command)} failed ({child.returncode}): {err.read().decode()[-2000:]}")
        captured.seek(0)
        stdout = captured.read().decode()
        max_rss_kib = int(rss.read().split()[-1])
    return {
        "wall_s": wall,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "max_rss_kib": max_rss_kib,
        "stdout": stdout,
        "broker_cpu_s": broker_after - broker_before,
    }


def parse_result(stdout):
    match = re.search(r"^RESULT (.*)$", stdout, re.M)
    if not match:
        raise RuntimeError(f"no RESULT line in: {stdout[-500:]}")
    values = dict(pair.split("=", 1) for pair in match.group(1).split())
    return {"records": int(values["records"]), "bytes": int(values["bytes"]), "elapsed_s": float(values["elapsed_s"]),
            "first_record_s": float(values["first_s"]) if "first_s" in values else None}


class Pinning:
    """Pins the broker (every thread) to core 0 for the pinned variant; restores its mask after."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.mask = None

    def __enter__(self):
        if self.enabled:
            pid = broker_pid()
            self.mask = subprocess.run(["taskset", "-p", str(pid)], capture_output=True, text=True, check=True).stdout.split()[-1]
            subprocess.run(["taskset", "-a", "-p", "-c", "0", str(pid)], capture_output=True, check=True)
            log(f"broker {pid} pinned to core 0 (mask was {self.mask}); clients run on core 1")
        return self

    def __exit__(self, *exc):
        if self.enabled and self.mask:
            pid = broker_pid()
            subprocess.run(["taskset", "-a", "-p", self.mask, str(pid)], capture_output=True, check=True)
            log(f"broker {pid} affinity restored to {self.mask}")


# ------------------------------------------------------------------------------------------------
# Datasets


def scaled(dataset, scale):
    name, partitions, records, kind, codec, batch = dataset
    count = max(partitions, round(records * scale / partitions) * partitions)
    return {
        "name": name,
        "partitions": partitions,
        "records": count,
        "kind": kind,
        "codec": codec,
        "batch": batch,
        "topic": f"bench-{name}-{count}",
    }


def make_datasets(bootstrap, datasets):
    tool = os.path.join(BENCH, "sluice", "target", "release", "make-dataset")
    for d in datasets:
        run([tool, bootstrap, d["topic"], str(d["partitions"]), str(d["records"]), d["kind"], d["codec"], str(d["batch"])])


# ------------------------------------------------------------------------------------------------
# The consumer comparison


def consumer_runs(bootstrap, datasets, clients, runs, warmup, variants, rows):
    commands = binaries()
    for client in clients:
        if not os.path.exists(commands[client][1]):
            raise SystemExit(f"{commands[client][1]} is missing: run without --no-build")
    for variant in variants:
        pinned = variant == "pinned"
        with Pinning(pinned):
            for d in datasets:
                args = [bootstrap, d["topic"], str(d["partitions"]), str(d["records"])]
                for round_index in range(-warmup, runs):
                    # Alternating: every client once per round; the order rotates by one each round
                    # so no client always runs right after the same neighbour.
                    shift = round_index % len(clients)
                    order = clients[shift:] + clients[:shift]
                    for client in order:
                        command = commands[client][0] + args + EXTRA_ARGS.get(client, [])
                        m = measure(command, cpu=1 if pinned else None)
                        r = parse_result(m["stdout"])
                        if r["records"] != d["records"]:
                            raise RuntimeError(f"{client} read {r['records']} records of {d['records']}")
                        row = {
                            "section": "consumer",
                            "variant": variant,
                            "dataset": d["name"],
                            "topic": d["topic"],
                            "client": client,
                            "round": round_index,
                            "warmup": round_index < 0,
                            **r,
                            **{k: v for k, v in m.items() if k != "stdout"},
                        }
                        rows.append(row)
                        log(
                            f"{variant} {d['name']} {client}{' (warm-up)' if row['warmup'] else ''}: "
                            f"{r['records'] / r['elapsed_s']:,.0f} rec/s, {r['bytes'] / MIB / r['elapsed_s']:.1f} MiB/s, "
                            f"cpu {m['user_s'] + m['sys_s']:.2f} s, rss {m['max_rss_kib'] / 1024:.0f} MiB"
                        )


# ------------------------------------------------------------------------------------------------
# The connector end to end


def connector_runs(bootstrap, dataset, runs, warmup, variants, rows, scratch):
    sluice = os.path.join(BENCH, "target", "release", "sluice")
    consume = os.path.join(BENCH, "sluice", "target", "release", "sluice-consume")
    # The dataset's value bytes (the denominator of CPU per GiB), read once, not timed.
    info = parse_result(subprocess.run(
        [consume, bootstrap, dataset["topic"], str(dataset["partitions"]), str(dataset["records"])],
        capture_output=True, text=True, check=True).stdout)
    config = os.path.join(scratch, "sluice.json")
    with open(config, "w") as f:
        json.dump({"brokers": [bootstrap], "topics": [dataset["topic"]]}, f)
    for variant in variants:
        pinned = variant == "pinned"
        with Pinning(pinned):
            for round_index in range(-warmup, runs):
                order = ["sluice read", "kcat"] if round_index % 2 == 0 else ["kcat", "sluice read"]
                for client in order:
                    dest = os.path.join(scratch, "out")
                    shutil.rmtree(dest, ignore_errors=True)
                    os.makedirs(dest)
                    if client == "sluice read":
                        command = [sluice, "read", "--config", config, "--dest", dest, "--mode", "bounded"]
                        m = measure(command, cpu=1 if pinned else None)
                        written = 0
                        for base, _, files in os.walk(os.path.join(dest, dataset["topic"], "segments")):
                            for name in files:
                                with open(os.path.join(base, name), "rb") as f:
                                    written += sum(1 for _ in f)
                    else:
                        output = os.path.join(dest, "kcat.jsonl")
                        command = ["kcat", "-C", "-b", bootstrap, "-t", dataset["topic"], "-o", "beginning", "-e", "-J", "-q"]
                        m = measure(command, cpu=1 if pinned else None, stdout_path=output)
                        with open(output, "rb") as f:
                            written = sum(1 for _ in f)
                    shutil.rmtree(dest, ignore_errors=True)
                    if written != dataset["records"]:
                        raise RuntimeError(f"{client} wrote {written} rows of {dataset['records']}")
                    row = {
                        "section": "connector",
                        "variant": variant,
                        "dataset": dataset["name"],
                        "topic": dataset["topic"],
                        "client": client,
                        "round": round_index,
                        "warmup": round_index < 0,
                        "records": written,
                        "bytes": info["bytes"],
                        "elapsed_s": m["wall_s"],
                        **{k: v for k, v in m.items() if k != "stdout"},
                    }
                    rows.append(row)
                    log(f"{variant} connector {client}{' (warm-up)' if row['warmup'] else ''}: "
                        f"{written / m['wall_s']:,.0f} rows/s, cpu {m['user_s'] + m['sys_s']:.2f} s")


# ------------------------------------------------------------------------------------------------
# The decode micro-benchmark (criterion)


def decode_bench(bootstrap, datasets):
    """Captures one fetch (up to 4 MiB) of partition 0 per dataset, runs the criterion benchmark
    on the captures, and returns one row per (capture, decoder) from criterion's estimates."""
    captured = os.path.join(BENCH, "results", "captured")
    shutil.rmtree(captured, ignore_errors=True)
    os.makedirs(captured)
    capture = os.path.join(BENCH, "sluice", "target", "release", "capture-fetch")
    sizes = {}
    for d in datasets:
        path = os.path.join(captured, f"{d['name']}.bin")
        out = subprocess.run([capture, bootstrap, d["topic"], "0", str(4 << 20), path],
                             capture_output=True, text=True, check=True).stdout
        wire, records = re.search(r": (\d+) bytes, (\d+) records", out).groups()
        sizes[d["name"]] = (int(wire), int(records))
        log(out.strip())
    bench_dir = os.path.join(BENCH, "sluice")
    shutil.rmtree(os.path.join(bench_dir, "target", "criterion"), ignore_errors=True)
    run(["cargo", "bench", "--quiet", "--bench", "decode"], cwd=bench_dir)
    rows = []
    for name, (wire, records) in sizes.items():
        for decoder in ("sluice", "kafka-protocol", "memcpy-wire", "memcpy-values"):
            estimates = os.path.join(bench_dir, "target", "criterion", name, decoder, "new", "estimates.json")
            with open(estimates) as f:
                median_ns = json.load(f)["median"]["point_estimate"]
            with open(os.path.join(bench_dir, "target", "criterion", name, decoder, "new", "benchmark.json")) as f:
                value_bytes = json.load(f)["throughput"]["Bytes"]
            rows.append({"capture": name, "decoder": decoder, "wire_bytes": wire, "records": records,
                         "value_bytes": value_bytes, "median_ns": median_ns})
    return rows


def decode_report(rows):
    if not rows:
        return ""
    lines = ["", "#### Decode path (criterion, one captured fetch of partition 0 per dataset)", "",
             "CRC-32C + decompression + iterating every record. Wire MiB/s is of the fetched bytes, value "
             "MiB/s of the record values (what the application gets), both over the same median time; "
             "memcpy-wire copies the fetched bytes, memcpy-values a buffer the size of the values.", "",
             "| capture | wire KiB | records | decoder | median µs | wire MiB/s | value MiB/s | records/s | vs kafka-protocol |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        seconds = r["median_ns"] / 1e9
        reference = next(t for t in rows if t["capture"] == r["capture"] and t["decoder"] == "kafka-protocol")
        decoding = r["decoder"] in ("sluice", "kafka-protocol")
        ratio = reference["median_ns"] / r["median_ns"]
        lines.append(
            f"| {r['capture']} | {r['wire_bytes'] / 1024:,.0f} | {r['records']:,} | {r['decoder']} | {seconds * 1e6:,.0f} | "
            f"{r['wire_bytes'] / MIB / seconds:,.0f} | {r['value_bytes'] / MIB / seconds:,.0f} | {fmt(r['records'] / seconds) if decoding else '-'} | "
            f"{fmt(ratio, 2) if decoding else '-'} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# Summaries, report, chart


def summarize(rows):
    groups = {}
    for row in rows:
        if row["warmup"]:
            continue
        groups.setdefault((row["section"], row["variant"], row["dataset"], row["client"]), []).append(row)
    summary = []
    for (section, variant, dataset, client), group in groups.items():
        med = lambda f: statistics.median(f(r) for r in group)
        gib = group[0]["bytes"] / GIB
        summary.append({
            "section": section,
            "variant": variant,
            "dataset": dataset,
            "client": client,
            "runs": len(group),
            "records": group[0]["records"],
            "bytes": group[0]["bytes"],
            "records_per_s": med(lambda r: r["records"] / r["elapsed_s"]),
            "mib_per_s": med(lambda r: r["bytes"] / MIB / r["elapsed_s"]),
            # From the first record to the Nth: the rate without connection and startup costs.
            "steady_records_per_s": statistics.median(
                (r["records"] - 1) / (r["elapsed_s"] - r["first_record_s"]) for r in group
            ) if all(r.get("first_record_s") not in (None, "") and r["elapsed_s"] > r["first_record_s"] for r in group) else None,
            "elapsed_s": med(lambda r: r["elapsed_s"]),
            "elapsed_min_s": min(r["elapsed_s"] for r in group),
            "elapsed_max_s": max(r["elapsed_s"] for r in group),
            "wall_s": med(lambda r: r["wall_s"]),
            "client_cpu_s_per_gib": med(lambda r: (r["user_s"] + r["sys_s"]) / gib),
            "peak_rss_mib": max(r["max_rss_kib"] for r in group) / 1024,
            "broker_cpu_s_per_gib": med(lambda r: r["broker_cpu_s"] / gib),
        })
    # Ratios against the best librdkafka row (consumer) or kcat (connector) of the same variant and
    # dataset, figure by figure: the fastest librdkafka row for throughput, the cheapest for CPU.
    for s in summary:
        references = LIBRDKAFKA_CLIENTS if s["section"] == "consumer" else ["kcat"]
        refs = [t for t in summary if (t["section"], t["variant"], t["dataset"]) == (s["section"], s["variant"], s["dataset"])
                and t["client"] in references]
        best_rate = max((t["records_per_s"] for t in refs), default=None)
        best_steady = max((t["steady_records_per_s"] for t in refs if t["steady_records_per_s"]), default=None)
        best_cpu = min((t["client_cpu_s_per_gib"] for t in refs if t["client_cpu_s_per_gib"]), default=None)
        s["throughput_vs_ref"] = s["records_per_s"] / best_rate if best_rate else None
        s["steady_vs_ref"] = s["steady_records_per_s"] / best_steady if best_steady and s["steady_records_per_s"] else None
        s["cpu_vs_ref"] = s["client_cpu_s_per_gib"] / best_cpu if best_cpu else None
    return summary


def machine_info():
    def sh(command):
        try:
            return subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60).stdout.strip()
        except Exception:
            return "?"
    cpu = sh("lscpu | sed -n 's/^Model name: *//p' | head -1")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "memory": sh("free -g | awk '/^Mem:/ {print $2 \" GiB\"}'"),
        "kernel": platform.release(),
        "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "kafka": sh(f"ls {ROOT}/.kafka/lib | sed -n 's/^kafka_2.13-\\(.*\\)\\.jar$/\\1/p' | head -1"),
        "rustc": sh("rustc --version"),
        "go": sh("go version"),
        "java": sh("java -version 2>&1 | head -1"),
        "kcat": sh("kcat -V 2>&1 | sed -n 's/.*\\(librdkafka version [^ ]*\\).*/\\1/p; s/^kcat - .*//' | head -1"),
    }


def fmt(value, digits=0):
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def report(summary, info, args, command_line, chart_name):
    lines = []
    lines.append(f"Run: `{command_line}`  ")
    lines.append(f"Scale {args.scale}, {args.runs} measured runs per client after {args.warmup} warm-up pass(es), "
                 f"variants: {', '.join(args.variants)}.  ")
    lines.append(f"Machine: {info['cpu']}, {info['memory']}, Linux {info['kernel']}; load average at the end "
                 f"{info['load_average']}.  ")
    lines.append(f"Kafka {info['kafka']}; {info['rustc']}; {info['go']}; {info['java']}.  ")
    lines.append("Ratios: against the best librdkafka row of the same dataset (of librdkafka, librdkafka-crc, "
                 "librdkafka-q1m and rdkafka-perf: the fastest for throughput, the cheapest for CPU).")
    lines.append("")
    lines.append(f"![throughput chart]({chart_name})")
    lines.append("")
    for variant in args.variants:
        for dataset in [d for d in CONSUMER_DATASETS if any(s["dataset"] == d for s in summary)]:
            rows = [s for s in summary if s["section"] == "consumer" and s["variant"] == variant and s["dataset"] == dataset]
            if not rows:
                continue
            rows.sort(key=lambda s: ALL_CLIENTS.index(s["client"]))
            first = rows[0]
            lines.append(f"#### {dataset}, {variant}: {first['records']:,} records, {first['bytes'] / MIB:,.0f} MiB of values")
            lines.append("")
            lines.append("| client | records/s | MiB/s | vs best librdkafka | records/s after the 1st | vs best librdkafka | client CPU s/GiB | CPU vs best librdkafka | peak RSS MiB | broker CPU s/GiB | elapsed median (min-max) s |")
            lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for s in rows:
                lines.append(
                    f"| {s['client']} | {fmt(s['records_per_s'])} | {fmt(s['mib_per_s'], 1)} | {fmt(s['throughput_vs_ref'], 2)} | "
                    f"{fmt(s['steady_records_per_s'])} | {fmt(s['steady_vs_ref'], 2)} | "
                    f"{fmt(s['client_cpu_s_per_gib'], 1)} | {fmt(s['cpu_vs_ref'], 2)} | {fmt(s['peak_rss_mib'])} | "
                    f"{fmt(s['broker_cpu_s_per_gib'], 1)} | {s['elapsed_s']:.3f} ({s['elapsed_min_s']:.3f}-{s['elapsed_max_s']:.3f}) |")
            lines.append("")
        rows = [s for s in summary if s["section"] == "connector" and s["variant"] == variant]
        if rows:
            first = rows[0]
            lines.append(f"#### Connector end to end ({first['dataset']}), {variant}: {first['records']:,} rows, "
                         f"{first['bytes'] / MIB:,.0f} MiB of values")
            lines.append("")
            lines.append("| tool | rows/s | vs kcat | CPU s/GiB | CPU vs kcat | peak RSS MiB | broker CPU s/GiB | wall median (min-max) s |")
            lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for s in sorted(rows, key=lambda s: s["client"] != "sluice read"):
                lines.append(
                    f"| {s['client']} | {fmt(s['records_per_s'])} | {fmt(s['throughput_vs_ref'], 2)} | "
                    f"{fmt(s['client_cpu_s_per_gib'], 1)} | {fmt(s['cpu_vs_ref'], 2)} | {fmt(s['peak_rss_mib'])} | "
                    f"{fmt(s['broker_cpu_s_per_gib'], 1)} | {s['elapsed_s']:.2f} ({s['elapsed_min_s']:.2f}-{s['elapsed_max_s']:.2f}) |")
            lines.append("")
    return "\n".join(lines)


COLORS = {"sluice": "#d62728", "librdkafka": "#1f77b4", "librdkafka-crc": "#6baed6", "librdkafka-q1m": "#17becf", "java": "#ff7f0e",
          "franz-go": "#2ca02c", "rskafka": "#9467bd", "krafka": "#8c564b",
          "rdkafka-perf": "#0b4f8a", "confluent-kafka": "#e377c2", "sluice read": "#d62728", "kcat": "#1f77b4"}


def chart(summary, variants, title):
    """A grouped horizontal bar chart (SVG), one group per dataset and variant: the solid bar is
    the median MiB/s on the client's whole clock, the outlined one the rate from the first record
    on (startup left out), so a run dominated by startup still shows the client's pace."""
    groups = []
    for variant in variants:
        for dataset in CONSUMER_DATASETS:
            rows = sorted((s for s in summary if s["section"] == "consumer" and s["variant"] == variant and s["dataset"] == dataset),
                          key=lambda s: ALL_CLIENTS.index(s["client"]))
            if rows:
                groups.append((f"{dataset} ({variant})", rows))
    if not groups:
        return "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'/>"

    def steady_mib(s):
        if not s["steady_records_per_s"]:
            return None
        return s["steady_records_per_s"] * (s["bytes"] / s["records"]) / MIB

    peak = max(max(s["mib_per_s"], steady_mib(s) or 0) for _, rows in groups for s in rows)
    bar, gap, left, width, top = 16, 18, 120, 520, 62
    height = top + sum(len(rows) * bar + gap + 18 for _, rows in groups) + 10
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{left + width + 150}' height='{height}' "
           "font-family='sans-serif' font-size='12'>",
           "<rect width='100%' height='100%' fill='white'/>",
           f"<text x='10' y='20' font-size='14' font-weight='bold'>{title}</text>",
           "<rect x='10' y='32' width='20' height='10' fill='#888'/>"
           "<text x='36' y='41'>whole run (connect to Nth record)</text>",
           "<rect x='260' y='32' width='20' height='10' fill='none' stroke='#888'/>"
           "<text x='286' y='41'>from the first record on</text>"]
    y = top
    for label, rows in groups:
        out.append(f"<text x='10' y='{y + 12}' font-weight='bold'>{label}</text>")
        y += 18
        for s in rows:
            color = COLORS.get(s["client"], "#777")
            w = max(1, s["mib_per_s"] / peak * width)
            out.append(f"<text x='{left - 6}' y='{y + 12}' text-anchor='end'>{s['client']}</text>")
            steady = steady_mib(s)
            if steady:
                out.append(f"<rect x='{left}' y='{y + 1}' width='{max(1, steady / peak * width):.1f}' "
                           f"height='{bar - 3}' fill='none' stroke='{color}'/>")
            out.append(f"<rect x='{left}' y='{y + 1}' width='{w:.1f}' height='{bar - 3}' fill='{color}'/>")
            text = f"{s['mib_per_s']:.0f}" + (f" / {steady:.0f}" if steady else "") + " MiB/s"
            end = max(w, steady / peak * width if steady else 0)
            out.append(f"<text x='{left + end + 4:.1f}' y='{y + 12}'>{text}</text>")
            y += bar
        y += gap
    out.append("</svg>")
    return "\n".join(out)


def update_benchmarks_md(text):
    """Replaces the generated part of BENCHMARKS.md (between the two markers) with text."""
    path = os.path.join(ROOT, "BENCHMARKS.md")
    begin, end = "<!-- bench/run.py results: begin -->", "<!-- bench/run.py results: end -->"
    with open(path) as f:
        current = f.read()
    if begin not in current or end not in current:
        raise SystemExit(f"BENCHMARKS.md has no '{begin}' ... '{end}' markers")
    head, rest = current.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + text + "\n" + end + tail)


# ------------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the record counts (0.02 for a quick run)")
    parser.add_argument("--runs", type=int, default=5, help="measured runs per client and dataset")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured passes before them")
    parser.add_argument("--variants", default="unpinned,pinned",
                        help="unpinned and/or pinned (broker on core 0, client on core 1 via taskset)")
    parser.add_argument("--clients", default=",".join(ALL_CLIENTS))
    parser.add_argument("--datasets", default=",".join(CONSUMER_DATASETS))
    parser.add_argument("--sections", default="consumer,connector,decode",
                        help="consumer (clients side by side), connector (sluice read vs kcat), "
                             "decode (criterion on captured fetch responses)")
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--label", default=None, help="results go to bench/results/LABEL (default: scale-DATE)")
    parser.add_argument("--update-benchmarks-md", action="store_true",
                        help="write the tables and chart into BENCHMARKS.md's generated section")
    args = parser.parse_args()
    args.variants = [v for v in args.variants.split(",") if v]
    args.sections = [v for v in args.sections.split(",") if v]
    for v in args.sections:
        if v not in ("consumer", "connector", "decode"):
            raise SystemExit(f"unknown section {v}")
    clients = [c for c in args.clients.split(",") if c]
    for c in clients:
        if c not in ALL_CLIENTS:
            raise SystemExit(f"unknown client {c}; known: {', '.join(ALL_CLIENTS)}")
    if not any(c in LIBRDKAFKA_CLIENTS for c in clients):
        log("warning: without a librdkafka row there are no ratios")
    for v in args.variants:
        if v not in ("unpinned", "pinned"):
            raise SystemExit(f"unknown variant {v}")
    if "pinned" in args.variants and os.cpu_count() < 2:
        raise SystemExit("the pinned variant needs 2 cores")
    label = args.label or f"scale{args.scale}-{time.strftime('%Y%m%d-%H%M')}"
    out_dir = os.path.join(BENCH, "results", label)
    os.makedirs(out_dir, exist_ok=True)
    command_line = "python3 bench/run.py " + " ".join(sys.argv[1:])

    broker_pid()
    consumer = "consumer" in args.sections
    connector = "connector" in args.sections
    if not args.no_build:
        build(clients if consumer else [], connector)
    wanted = [n for n in args.datasets.split(",") if n]
    datasets = [scaled(d, args.scale) for d in DATASETS]
    consumer_sets = [d for d in datasets if d["name"] in wanted]
    connector_set = next(d for d in datasets if d["name"] == CONNECTOR_DATASET)
    # The decode section captures the connector's dataset too.
    decode = "decode" in args.sections
    make_datasets(args.bootstrap, consumer_sets + ([connector_set] if connector or decode else []))

    rows = []
    decode_rows = []
    started = time.time()
    try:
        if consumer:
            consumer_runs(args.bootstrap, consumer_sets, clients, args.runs, args.warmup, args.variants, rows)
        if connector:
            with tempfile.TemporaryDirectory(prefix="connector-", dir=os.path.join(BENCH, "results")) as scratch:
                connector_runs(args.bootstrap, connector_set, args.runs, args.warmup, args.variants, rows, scratch)
        if decode:
            decode_rows = decode_bench(args.bootstrap, consumer_sets + [connector_set])
    finally:
        if rows:
            with open(os.path.join(out_dir, "runs.csv"), "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
                writer.writeheader()
                writer.writerows(rows)
    summary = summarize(rows)
    info = machine_info()
    info["minutes"] = round((time.time() - started) / 60, 1)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump({"machine": info, "args": vars(args), "datasets": datasets, "summary": summary,
                   "decode": decode_rows}, f, indent=1)
    title = f"Consumer throughput, median MiB/s of record values (scale {args.scale}, {args.runs} runs)"
    with open(os.path.join(out_dir, "chart.svg"), "w") as f:
        f.write(chart(summary, args.variants, title))
    chart_path = os.path.relpath(os.path.join(out_dir, "chart.svg"), ROOT)
    text = report(summary, info, args, command_line, chart_path) + decode_report(decode_rows)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text + "\n")
    if args.update_benchmarks_md:
        update_benchmarks_md(text)
    print(text)
    log(f"results in {os.path.relpath(out_dir, ROOT)} ({info['minutes']} min)")


if __name__ == "__main__":
    main()
