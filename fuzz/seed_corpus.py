#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ from the golden frames in wire/tests/golden/ plus a
few hand-made edge cases. Run from anywhere: python3 fuzz/seed_corpus.py"""
import os, struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "wire/tests/golden")
CORPUS = os.path.join(ROOT, "fuzz/corpus")
# target -> (min version, golden api name)
RESPONSES = {
    "api_versions": (0, "api_versions"), "metadata": (4, "metadata"), "list_offsets": (1, "list_offsets"),
    "fetch": (12, "fetch"), "produce": (3, "produce"), "create_topics": (2, "create_topics"),
    "delete_topics": (1, "delete_topics"), "delete_records": (0, "delete_records"),
    "create_partitions": (0, "create_partitions"), "sasl_handshake": (0, None), "sasl_authenticate": (0, None),
    "offset_for_leader_epoch": (2, None), "init_producer_id": (0, None),
}

def put(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)

def golden(name):
    with open(os.path.join(GOLDEN, name), "rb") as f:
        return f.read()

def s16(s):
    return struct.pack(">h", len(s)) + s

goldens = sorted(n for n in os.listdir(GOLDEN) if n.endswith(".bin"))
for target, (low, api) in RESPONSES.items():
    put(target, "empty", b"")
    put(target, "version-only", bytes([0]))
    for n in goldens:
        stem = n[:-4]
        if api and stem.startswith(api + "_v"):
            version = int(stem[len(api) + 2:].split("_")[0])
            put(target, "golden-" + stem, bytes([version - low]) + golden(n))

# Hand-made bodies for APIs the capture does not exercise.
put("sasl_handshake", "v1-plain", bytes([1]) + struct.pack(">hi", 0, 2) + s16(b"PLAIN") + s16(b"SCRAM-SHA-256"))
put("sasl_handshake", "v0-unsupported", bytes([0]) + struct.pack(">hi", 33, 1) + s16(b"PLAIN"))
put("sasl_authenticate", "v0-ok", bytes([0]) + struct.pack(">h", 0) + struct.pack(">h", -1) + struct.pack(">i", 3) + b"abc")
put("sasl_authenticate", "v1-lifetime", bytes([1]) + struct.pack(">h", 58) + s16(b"bad") + struct.pack(">i", 0) + struct.pack(">q", 3600000))
put("sasl_authenticate", "v2-flexible", bytes([2]) + struct.pack(">h", 0) + b"\x00" + b"\x04abc" + struct.pack(">q", 0) + b"\x00")
put("init_producer_id", "v0", bytes([0]) + struct.pack(">ihqh", 0, 0, 4000, 0))
put("init_producer_id", "v4-flexible", bytes([4]) + struct.pack(">ihqh", 0, 0, 4000, 1) + b"\x00")
put("offset_for_leader_epoch", "v2", bytes([0]) + struct.pack(">ii", 0, 1) + s16(b"t") + struct.pack(">i", 1)
    + struct.pack(">hiiq", 0, 0, 5, 42))
put("offset_for_leader_epoch", "v4-flexible", bytes([2]) + struct.pack(">i", 0) + b"\x02" + b"\x02t" + b"\x02"
    + struct.pack(">hiiq", 0, 0, 5, 42) + b"\x00" + b"\x00" + b"\x00")

# frame: [chunk selector] + frames.
frames = b"".join(struct.pack(">i", len(golden(n))) + golden(n) for n in goldens[:4])
put("frame", "goldens-chunk1", bytes([0]) + frames)
put("frame", "goldens-chunk16", bytes([15]) + frames)
put("frame", "negative-size", bytes([3]) + b"\xff\xff\xff\xff")
put("frame", "too-large", bytes([3]) + b"\x00\x00\x10\x01")
put("frame", "partial", bytes([1]) + b"\x00\x00\x00\x05abc")
put("frame", "empty-frames", bytes([2]) + b"\x00" * 12)

records = sorted(n for n in os.listdir(os.path.join(GOLDEN, "records")) if n.endswith(".bin"))
def blob(n):
    with open(os.path.join(GOLDEN, "records", n), "rb") as f:
        return f.read()

for n in records:
    put("record_batch", n[:-4], blob(n))
    # read_committed: [n aborted][(pid, first) pairs][fetch offset] records
    put("read_committed", n[:-4] + "-none-aborted", bytes([0, 0]) + blob(n))
put("record_batch", "truncated", blob("none.bin")[:-5])
put("record_batch", "empty", b"")
# TxnWriter: producer 5 aborted from offset 3 (p0) / 1 (p2) in the capture.
put("read_committed", "txn_p0-aborted", bytes([1, 5, 3, 0]) + blob("txn_p0.bin"))
put("read_committed", "txn_p2-aborted", bytes([1, 5, 1, 0]) + blob("txn_p2.bin"))
put("read_committed", "txn_p0-from-2", bytes([1, 5, 3, 2]) + blob("txn_p0.bin"))

# fetch_state: [isolation] then ops; see fetch_state() in fuzz/src/targets.rs.
def synth(records, tp_index=0, by_id=1, error=3):
    padded = records + (b"\x00" if len(records) % 2 else b"")
    return bytes([5, 0, tp_index, by_id, error, 0, len(padded) // 2]) + padded
assign_a0 = bytes([0, 0, 0])      # assign a-0 at 0
assign_b0 = bytes([0, 1, 0])      # assign b-0 at 0
plan = bytes([2])
put("fetch_state", "assign-plan-response-none", bytes([0]) + assign_a0 + plan + synth(blob("none.bin")))
put("fetch_state", "assign-plan-response-zstd-by-name", bytes([0]) + assign_a0 + plan + synth(blob("zstd.bin"), by_id=0))
put("fetch_state", "txn", bytes([0]) + assign_a0 + assign_b0 + plan + synth(blob("txn_p2.bin")) + plan + bytes([3, 0]) + plan)
put("fetch_state", "reassign-in-flight", bytes([0]) + assign_a0 + plan + assign_a0 + plan + synth(blob("none.bin")) + plan)
put("fetch_state", "wire-response", bytes([0]) + assign_a0 + plan + bytes([4, 0, 6, 235]) + golden("fetch_v18.bin")[:940])
put("fetch_state", "errors", bytes([1]) + assign_a0 + plan + synth(b"", error=0) + plan + synth(b"", error=1) + plan + bytes([3, 0]))
print("corpus written to", CORPUS)
