#!/usr/bin/env python3
"""The rebalance pause of a consumer group (issue #22): from one member's death to the first
record of one of its partitions processed by another member.

    tests/kafka/broker.sh start      # if not running
    cargo build --release -p sluice
    python3 bench/group_pause.py --sluice target/release/sluice --runs 5

Cases: sluice workers (`sluice read --mode continuous` with `group_id`) with `group_protocol`
classic and consumer (KIP-848), and the Java consumer (tests/java/GroupMember.java) with the same
two protocols. Stops: `kill` (SIGKILL) and `term` (sluice: SIGTERM, which cuts and certifies the
epochs in progress, commits and leaves the group; Java: closing GroupMember's stdin, which makes
it call `KafkaConsumer.close()` and leave the group; a SIGTERM would end the JVM without leaving,
since GroupMember has no shutdown hook, so the group would see what it sees after a SIGKILL).

Each trial: a 12-partition topic (created if missing) with ChaosProducer writing all the time
(transactions of 10 records over the partitions, ~20 ms apart: a record about every 40-80 ms per
partition); 3 members started together (or, with --stagger-ms S, each at a random moment in
the first S ms) with a fresh group (Java: one group per case and stop,
reused across runs, so that a run starts from the previous run's commits and not from the log
start); wait until all 12 partitions are owned by the 3 members, the ownership has not changed
for 3 s and every partition made progress in the last 2 s; wait a random 0.3-1.3 s (so that the
stop falls at a random phase of the members' heartbeats); stop member (run % 3); watch until
every partition the victim owned has made progress under a survivor (or 60 s).

What counts as "a record of a moved partition processed":
- sluice: a new segment file `D/T/segments/p<N>-<first>-<last>.jsonl` of a moved partition N,
  first seen after the partition file `D/_sluice/partitions/T/p<N>.json` names a survivor as the
  owner, with `first` at or past the last `next_offset` certified under the victim (the file is
  renamed into place after it is written and fsynced, before it is certified). The directory and
  partition files are polled every `--poll-ms` (25). Also reported: the first poll at which the
  certified `next_offset` advanced under the survivor ("cert").
  The first epoch of a handed-over partition is cut as soon as it holds a record (not after
  `epoch_max_ms`), so the figure is the read, the write and the certification.
  Also from the survivors' own log lines (tracing's UTC timestamps, the same machine's clock):
  "claimed" (`assigned T-N: reading from offset`: the group's assignment seen, the partition
  claimed in the destination, its offsets listed) and "first records read" (`T-N handed over:
  first records read`), which is the point comparable to the Java member's RECORD line.
- Java: the first `RECORD <partition> <offset>` line of a moved partition printed by a surviving
  member, timestamped when Python reads the line (GroupMember flushes after every poll).

Non-moved partitions (owned by the same survivor before the stop and at the end): the longest
gap between two progress events (sluice: new segments; Java: RECORD lines) that overlaps the
window from the stop to one second after the last moved partition resumed, next to the longest
gap in the 5 s before the stop (the baseline: producer cadence, epochs, polls). A partition
that stopped during the rebalance shows as a gap near the pause.

Prints a table (median and worst over the runs, ms) and writes it, with every run, to --out.
Python 3 standard library only.
"""

import argparse
import json
import os
import random
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
BROKER_SH = os.path.join(ROOT, "tests", "kafka", "broker.sh")
SEGMENT = re.compile(r"^p(\d+)-(\d+)-(\d+)\.jsonl$")
OWNER_PID = re.compile(r"-(\d+)-[0-9a-fA-F]+$")


def log(*args):
    print("group_pause:", *args, file=sys.stderr, flush=True)


def now():
    return time.monotonic()


# ---------------------------------------------------------------------------------------------
# Processes


class LineProcess:
    """A child whose stdout lines are read by a thread and handed to `on_line(t, line)`."""

    def __init__(self, argv, on_line, stderr_path, stdin=True):
        self.stderr_file = open(stderr_path, "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self.stderr_file, text=True, bufsize=1)
        self.on_line = on_line
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.on_line(now(), line.strip())

    def close_stdin(self):
        try:
            self.proc.stdin.close()
        except Exception:
            pass

    def wait(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr_file.close()


class Producer:
    def __init__(self, bootstrap, topic, partitions, workdir):
        self.ready = threading.Event()
        self.proc = LineProcess([BROKER_SH, "java", "ChaosProducer", bootstrap, topic, str(partitions)],
                                self._line, os.path.join(workdir, "producer.err"))

    def _line(self, t, line):
        if line == "READY":
            self.ready.set()
        elif line.startswith("committed="):
            log("producer:", line)

    def stop(self):
        self.proc.close_stdin()
        self.proc.wait(30)


class JavaMember:
    kind = "java"

    def __init__(self, bootstrap, topic, group, protocol, errpath):
        self.lock = threading.Lock()
        self.owned = set()
        self.events = {}  # partition -> [t, ...] of RECORD lines
        self.ownership_changed = now()
        self.ready = False
        self.proc = LineProcess([BROKER_SH, "java", "GroupMember", bootstrap, topic, group, protocol],
                                self._line, errpath)
        self.pid = self.proc.proc.pid

    def _line(self, t, line):
        parts = line.split()
        if not parts:
            return
        with self.lock:
            if parts[0] == "RECORD":
                self.events.setdefault(int(parts[1]), []).append(t)
            elif parts[0] in ("ASSIGNED", "REVOKED", "LOST"):
                ps = {int(x) for x in parts[1].split(",")} if len(parts) > 1 else set()
                if parts[0] == "ASSIGNED":
                    self.owned |= ps
                else:
                    self.owned -= ps
                self.ownership_changed = t
            elif parts[0] == "READY":
                self.ready = True

    def stop(self, how):
        if how == "kill":
            os.kill(self.pid, signal.SIGKILL)
        else:
            self.proc.close_stdin()

    def finish(self):
        self.proc.close_stdin()

    def wait(self, timeout=30):
        self.proc.wait(timeout)


class SluiceWorker:
    kind = "sluice"

    def __init__(self, binary, config, dest, errpath):
        self.err = open(errpath, "w")
        self.proc = subprocess.Popen([binary, "read", "--config", config, "--dest", dest, "--mode", "continuous"],
                                     stdin=subprocess.DEVNULL, stdout=self.err, stderr=self.err)
        self.pid = self.proc.pid

    def stop(self, how):
        os.kill(self.pid, signal.SIGKILL if how == "kill" else signal.SIGTERM)

    def finish(self):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)

    def wait(self, timeout=30):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


class SluiceObserver:
    """Polls the shared destination: partition files (owner, certified next_offset) and new
    segment files. Keeps, per partition, the history of (t, owner pid, next_offset) changes and
    (t, first, name) of every new segment."""

    def __init__(self, dest, topic, partitions, poll_ms):
        self.pdir = os.path.join(dest, "_sluice", "partitions", topic)
        self.sdir = os.path.join(dest, topic, "segments")
        self.partitions = partitions
        self.poll = poll_ms / 1000.0
        self.lock = threading.Lock()
        self.state = {}  # p -> (owner_pid, next_offset)
        self.history = {p: [] for p in range(partitions)}  # p -> [(t, owner_pid, next_offset)]
        self.segments = {p: [] for p in range(partitions)}  # p -> [(t, first, name)]
        self.seen = set()
        self.ownership_changed = now()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopped:
            t = now()
            try:
                names = os.listdir(self.sdir)
            except FileNotFoundError:
                names = []
            fresh = []
            for name in names:
                if name in self.seen:
                    continue
                m = SEGMENT.match(name)
                if m:
                    self.seen.add(name)
                    fresh.append((int(m.group(1)), int(m.group(2)), name))
            states = {}
            for p in range(self.partitions):
                try:
                    with open(os.path.join(self.pdir, f"p{p}.json")) as f:
                        doc = json.load(f)
                except (FileNotFoundError, ValueError):
                    continue
                m = OWNER_PID.search(doc.get("owner") or "")
                nxt = doc.get("next_offset")
                if isinstance(nxt, dict):
                    nxt = nxt.get("next_offset")
                states[p] = (int(m.group(1)) if m else None, nxt)
            with self.lock:
                for p, first, name in fresh:
                    if p < self.partitions:
                        self.segments[p].append((t, first, name))
                for p, st in states.items():
                    if self.state.get(p) != st:
                        if self.state.get(p, (None,))[0] != st[0]:
                            self.ownership_changed = t
                        self.state[p] = st
                        self.history[p].append((t, st[0], st[1]))
            time.sleep(max(0.0, self.poll - (now() - t)))

    def stop(self):
        self.stopped = True
        self.thread.join()


# ---------------------------------------------------------------------------------------------
# One trial


def owners_now(kind, members, observer, skip=None):
    """partition -> member index, for the partitions owned by a member (but member `skip`)."""
    result = {}
    if kind == "java":
        for i, m in enumerate(members):
            if i == skip:
                continue
            with m.lock:
                for p in m.owned:
                    result[p] = i
    else:
        pids = {m.pid: i for i, m in enumerate(members) if i != skip}
        with observer.lock:
            for p, (pid, _) in observer.state.items():
                if pid in pids:
                    result[p] = pids[pid]
    return result


def progress_times(kind, members, observer, p):
    """Times of progress events of partition p (all members)."""
    if kind == "java":
        out = []
        for m in members:
            with m.lock:
                out.extend(m.events.get(p, []))
        return sorted(out)
    with observer.lock:
        return [t for t, _, _ in observer.segments[p]]


def last_change(kind, members, observer):
    if kind == "java":
        return max(m.ownership_changed for m in members)
    return observer.ownership_changed


def wait_stable(kind, members, observer, partitions, timeout):
    deadline = now() + timeout
    while now() < deadline:
        time.sleep(0.1)
        owners = owners_now(kind, members, observer)
        t = now()
        if len(owners) != partitions or len(set(owners.values())) != len(members):
            continue
        if t - last_change(kind, members, observer) < 3.0:
            continue
        if all((progress_times(kind, members, observer, p) or [0])[-1] > t - 2.0 for p in range(partitions)):
            return owners
    return None


def max_gap(times, start, end):
    """The longest gap between consecutive events (plus the open gap to `end`) overlapping [start, end]."""
    before = [t for t in times if t <= start]
    inside = [t for t in times if start < t <= end]
    points = ([before[-1]] if before else [start]) + inside + [end]
    return max(b - a for a, b in zip(points, points[1:]))


def baseline_gap(times, start, end):
    """The longest gap between consecutive events inside [start, end], and from the last one to `end`."""
    inside = [t for t in times if start <= t <= end] + [end]
    return max([b - a for a, b in zip(inside, inside[1:])] or [end - start])


def start_delays(stagger_ms):
    """The pauses before starting each of the 3 members: with --stagger-ms S, the members start
    at independent random moments in [0, S) ms, so that their heartbeats are at independent
    phases (as members started on different hosts at different times are). Without it they start
    together: `sluice` processes then heartbeat within a few ms of each other for the whole
    trial, while the JVMs' start-up spreads the Java members by tens to hundreds of ms, and with
    KIP-848 (survivors learn of freed partitions at their next heartbeat) the first survivor to
    learn is then no sooner than the last."""
    if not stagger_ms:
        return [0.0, 0.0, 0.0]
    at = sorted(random.uniform(0, stagger_ms / 1000) for _ in range(3))
    return [b - a for a, b in zip([0.0] + at[:-1], at)]


def trial(args, case, stop, run, workroot):
    system, protocol = case.split("-")
    victim_index = run % 3
    tag = f"{case}-{stop}-{run}"
    tdir = os.path.join(workroot, tag)
    os.makedirs(tdir)
    members, observer = [], None
    try:
        if system == "sluice":
            dest = os.path.join(tdir, "dest")
            os.makedirs(dest)
            group = f"gb-pause-{tag}-{os.getpid()}"
            config = {"brokers": [args.bootstrap], "topics": [args.topic], "group_id": group,
                      "group_protocol": protocol, "group_session_timeout_ms": 6000,
                      "group_heartbeat_interval_ms": 500, "epoch_max_records": 50, "epoch_max_ms": 200,
                      "fetch_max_wait_ms": 100, "start_position": "latest"}
            cpath = os.path.join(tdir, "config.json")
            with open(cpath, "w") as f:
                json.dump(config, f)
            observer = SluiceObserver(dest, args.topic, args.partitions, args.poll_ms)
            for i, delay in enumerate(start_delays(args.stagger_ms)):
                time.sleep(delay)
                members.append(SluiceWorker(args.sluice, cpath, dest, os.path.join(tdir, f"w{i}.log")))
        else:
            group = f"gb-pause-{case}-{stop}-{os.getpid()}"
            for i, delay in enumerate(start_delays(args.stagger_ms)):
                time.sleep(delay)
                members.append(JavaMember(args.bootstrap, args.topic, group, protocol, os.path.join(tdir, f"m{i}.err")))
        owners = wait_stable(system, members, observer, args.partitions, 120)
        if owners is None:
            log(f"{tag}: the group did not settle in 120 s; run skipped (logs in {tdir})")
            return None
        victim = members[victim_index]
        moved = sorted(p for p, i in owners.items() if i == victim_index)
        victim_pid = victim.pid
        # A random delay, so that the stop does not fall at the same phase of the heartbeats
        # (1 s with KIP-848, 500 ms classic) in every run: the members started together.
        delay = random.uniform(0.3, 1.3)
        time.sleep(delay)
        t0, t0_wall = now(), time.time()
        victim.stop(stop)
        # Watch until every moved partition progressed under a survivor.
        resumed, resumed_cert = {}, {}
        deadline = t0 + args.timeout
        while now() < deadline and len(resumed) < len(moved):
            time.sleep(0.02)
            if system == "java":
                for p in moved:
                    if p in resumed:
                        continue
                    for i, m in enumerate(members):
                        if i == victim_index:
                            continue
                        with m.lock:
                            later = [t for t in m.events.get(p, []) if t > t0]
                        if later:
                            resumed[p] = min(later + [resumed.get(p, 1e18)])
            else:
                with observer.lock:
                    for p in moved:
                        if p in resumed:
                            continue
                        hist = observer.history[p]
                        # The poll at which a survivor first shows as the owner after t0.
                        change = next((h for h in hist if h[0] > t0 and h[1] not in (victim_pid, None)), None)
                        if change is None:
                            continue
                        # The victim's last certified position.
                        n0 = max([h[2] for h in hist if h[1] == victim_pid and h[2] is not None] or [0])
                        seg = next((s for s in observer.segments[p] if s[0] >= change[0] and s[1] >= n0), None)
                        if p not in resumed_cert:
                            cert = next((h for h in hist if h[0] >= change[0] and h[1] != victim_pid
                                         and h[2] is not None and h[2] > n0), None)
                            if cert:
                                resumed_cert[p] = cert[0]
                        if seg:
                            resumed[p] = seg[0]
        if len(resumed) < len(moved):
            log(f"{tag}: partitions {sorted(set(moved) - set(resumed))} did not resume in {args.timeout} s")
        end = max(resumed.values()) if resumed else now()
        time.sleep(max(0.0, end + 1.0 - now()))
        final = owners_now(system, members, observer, skip=victim_index)
        nonmoved = [p for p, i in owners.items() if i != victim_index and final.get(p) == i]
        reshuffled = [p for p, i in owners.items() if i != victim_index and final.get(p) != i]
        gaps = [max_gap(progress_times(system, members, observer, p), t0, end + 1.0) for p in nonmoved]
        base = [baseline_gap(progress_times(system, members, observer, p), t0 - 3.0, t0) for p in nonmoved]
        claimed, read_first = {}, {}
        if system == "sluice":
            for i, m in enumerate(members):
                if i != victim_index:
                    survivor_marks(m.err.name, args.topic, moved, t0_wall, claimed, read_first)
        result = {
            "case": case, "stop": stop, "run": run, "victim": victim_index, "moved": moved,
            # From the survivors' own log lines (tracing's UTC timestamps, this machine's clock):
            # the claim done and offsets listed ("assigned P: reading from offset"), and the
            # first records of a moved partition read ("handed over"), the point comparable to
            # the Java member's first record printed.
            "claimed_first_ms": 1000 * (min(claimed.values()) - t0_wall) if claimed else None,
            "read_first_ms": 1000 * (min(read_first.values()) - t0_wall) if read_first else None,
            "read_all_ms": 1000 * (max(read_first.values()) - t0_wall) if len(read_first) == len(moved) else None,
            "first_ms": 1000 * (min(resumed.values()) - t0) if resumed else None,
            "all_ms": 1000 * (max(resumed.values()) - t0) if len(resumed) == len(moved) else None,
            "cert_first_ms": 1000 * (min(resumed_cert.values()) - t0) if resumed_cert else None,
            "per_partition_ms": {p: round(1000 * (t - t0)) for p, t in sorted(resumed.items())},
            "nonmoved": len(nonmoved), "reshuffled": reshuffled,
            "nonmoved_max_gap_ms": 1000 * max(gaps) if gaps else None,
            "baseline_max_gap_ms": 1000 * max(base) if base else None,
            "loadavg_1m": os.getloadavg()[0], "delay_s": round(delay, 3),
        }
        log(f"{tag}: moved {moved} first {result['first_ms']:.0f} ms, all "
            f"{result['all_ms'] if result['all_ms'] is None else round(result['all_ms'])} ms, "
            f"non-moved max gap {result['nonmoved_max_gap_ms'] or 0:.0f} ms "
            f"(baseline {result['baseline_max_gap_ms'] or 0:.0f}), reshuffled {reshuffled}")
        return result
    finally:
        for m in members:
            try:
                m.finish()
            except ProcessLookupError:
                pass
        for m in members:
            m.wait(30)
        if observer:
            observer.stop()
        if not args.keep:
            shutil.rmtree(tdir, ignore_errors=True)


ANSI = re.compile(r"\x1b\[[0-9;]*m")
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z")


def survivor_marks(path, topic, moved, t0_wall, claimed, read_first):
    """The earliest time after t0 (wall clock) at which this survivor's log says it claimed,
    and first read, each moved partition; merged into the dicts (earliest over survivors)."""
    import calendar
    marks = [(claimed, re.compile(rf"assigned {re.escape(topic)}-(\d+): reading from offset")),
             (read_first, re.compile(rf"{re.escape(topic)}-(\d+) handed over: first records read"))]
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return
    for line in lines:
        line = ANSI.sub("", line)
        stamp = LOG_TIME.match(line)
        if not stamp:
            continue
        t = calendar.timegm(time.strptime(stamp.group(1), "%Y-%m-%dT%H:%M:%S")) + float(stamp.group(2) or 0)
        if t <= t0_wall:
            continue
        for into, pattern in marks:
            found = pattern.search(line)
            if found and int(found.group(1)) in moved:
                p = int(found.group(1))
                into[p] = min(t, into.get(p, t))


# ---------------------------------------------------------------------------------------------


def fmt(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-", "-"
    return f"{statistics.median(values):,.0f}", f"{max(values):,.0f}"


def table(results, cases, stops):
    lines = [
        "| case | stop | runs | first moved partition: median | worst | all moved: median | worst "
        "| sluice cert advance: median | worst | sluice claimed: median | worst | sluice first records read: median "
        "| worst | non-moved max gap: median | worst | baseline gap (median) "
        "| partitions reshuffled among survivors |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for case in cases:
        for stop in stops:
            rs = [r for r in results if r["case"] == case and r["stop"] == stop]
            if not rs:
                continue
            first = fmt([r["first_ms"] for r in rs])
            all_ = fmt([r["all_ms"] for r in rs])
            cert = fmt([r["cert_first_ms"] for r in rs])
            claimed = fmt([r.get("claimed_first_ms") for r in rs])
            read = fmt([r.get("read_first_ms") for r in rs])
            gap = fmt([r["nonmoved_max_gap_ms"] for r in rs])
            base = fmt([r["baseline_max_gap_ms"] for r in rs])[0]
            incomplete = sum(1 for r in rs if r["all_ms"] is None)
            stop_name = stop if case.startswith("sluice") or stop == "kill" else "term (stdin EOF: close())"
            lines.append(f"| {case} | {stop_name} | {len(rs)}{f' ({incomplete} incomplete)' if incomplete else ''} "
                         f"| {first[0]} | {first[1]} | {all_[0]} | {all_[1]} | {cert[0]} | {cert[1]} "
                         f"| {claimed[0]} | {claimed[1]} | {read[0]} | {read[1]} "
                         f"| {gap[0]} | {gap[1]} | {base} | {sum(len(r['reshuffled']) for r in rs)} |")
    return "\n".join(lines)


def ensure_topic(args):
    subprocess.run([BROKER_SH, "java", "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", args.bootstrap,
                    "--create", "--if-not-exists", "--topic", args.topic, "--partitions", str(args.partitions),
                    "--replication-factor", "1"], check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="127.0.0.1:19092")
    ap.add_argument("--topic", default="gb-pause-12")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target", "release", "sluice"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cases", default="sluice-classic,sluice-consumer,java-classic,java-consumer")
    ap.add_argument("--stops", default="kill,term")
    ap.add_argument("--poll-ms", type=int, default=25)
    ap.add_argument("--stagger-ms", dest="stagger_ms", type=int, default=0,
                    help="start the 3 members at independent random moments within this many ms (both systems)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the moved partitions")
    ap.add_argument("--out", default=None, help="markdown file for the table and every run")
    ap.add_argument("--keep", action="store_true", help="keep the trial directories (logs, destinations)")
    args = ap.parse_args()
    # SIGTERM: unwind, so that the members and the producer are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    cases = args.cases.split(",")
    stops = args.stops.split(",")
    workroot = tempfile.mkdtemp(prefix="group-pause-")
    ensure_topic(args)
    producer = Producer(args.bootstrap, args.topic, args.partitions, workroot)
    if not producer.ready.wait(90):
        sys.exit("ChaosProducer did not print READY in 90 s")
    results = []
    started = time.time()
    try:
        for run in range(args.runs):
            # Rotate the order every run, so that no case always comes first.
            order = [(c, s) for c in cases for s in stops]
            shift = run % len(order)
            for case, stop in order[shift:] + order[:shift]:
                r = trial(args, case, stop, run, workroot)
                if r:
                    results.append(r)
    finally:
        producer.stop()
        if not args.keep:
            shutil.rmtree(workroot, ignore_errors=True)
    text = table(results, cases, stops)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# group_pause.py: {' '.join(sys.argv[1:])}\n\n")
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(started))}, "
                    f"{len(results)} runs, {time.time() - started:.0f} s; times in ms from the stop\n\n")
            f.write(text + "\n\n## Every run\n\n```\n")
            for r in results:
                f.write(json.dumps(r) + "\n")
            f.write("```\n")


if __name__ == "__main__":
    main()
