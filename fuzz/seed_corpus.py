#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ from the golden frames in wire/tests/golden/, the PEM
files in fuzz/seeds/pem/, SCRAM exchanges computed here, and hand-made edge cases. Run from
anywhere: python3 fuzz/seed_corpus.py"""
import base64, hashlib, hmac, os, struct

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
    # The group APIs' seeds named broker-* were captured from the real broker by
    # wire/tests/golden_group_frames.rs (SLUICE_CAPTURE_SEEDS=fuzz/corpus).
    "find_coordinator": (0, None), "join_group": (0, None), "sync_group": (0, None), "heartbeat": (0, None),
    "leave_group": (0, None), "offset_commit": (2, None), "offset_fetch": (1, None),
    "consumer_group_heartbeat": (0, None),
    # The transaction APIs: hand-made bodies below.
    "add_partitions_to_txn": (0, None), "add_offsets_to_txn": (0, None), "end_txn": (0, None),
    "txn_offset_commit": (0, None),
    # DescribeConfigs (of `sluice write`'s offsets topic): hand-made bodies below.
    "describe_configs": (1, None),
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
# Transactions: hand-made bodies of each version family (rigid and flexible).
put("add_partitions_to_txn", "v0-two-partitions", bytes([0]) + struct.pack(">ii", 0, 1) + s16(b"t") + struct.pack(">i", 2)
    + struct.pack(">ih", 0, 0) + struct.pack(">ih", 1, 51))
put("add_partitions_to_txn", "v3-flexible", bytes([3]) + struct.pack(">i", 0) + b"\x02" + b"\x02t" + b"\x02"
    + struct.pack(">ih", 0, 0) + b"\x00" + b"\x00" + b"\x00")
put("add_offsets_to_txn", "v0", bytes([0]) + struct.pack(">ih", 0, 0))
put("add_offsets_to_txn", "v3-flexible", bytes([3]) + struct.pack(">ih", 0, 51) + b"\x00")
put("end_txn", "v0", bytes([0]) + struct.pack(">ih", 0, 0))
put("end_txn", "v4-flexible", bytes([4]) + struct.pack(">ih", 0, 90) + b"\x00")
put("end_txn", "v5-next-epoch", bytes([5]) + struct.pack(">ihqh", 0, 0, 4000, 3) + b"\x00")
put("txn_offset_commit", "v0", bytes([0]) + struct.pack(">ii", 0, 1) + s16(b"t") + struct.pack(">i", 1) + struct.pack(">ih", 0, 0))
put("txn_offset_commit", "v5-flexible", bytes([5]) + struct.pack(">i", 0) + b"\x02" + b"\x02t" + b"\x02"
    + struct.pack(">ih", 0, 25) + b"\x00" + b"\x00" + b"\x00")
put("describe_configs", "v1-cleanup-policy", bytes([0]) + struct.pack(">ii", 0, 1) + struct.pack(">hh", 0, -1) + bytes([2])
    + s16(b"t") + struct.pack(">i", 1) + s16(b"cleanup.policy") + s16(b"compact") + bytes([0, 1, 0]) + struct.pack(">i", 0))
put("describe_configs", "v4-flexible", bytes([3]) + struct.pack(">i", 0) + b"\x02" + struct.pack(">h", 0) + b"\x00" + bytes([2])
    + b"\x02t" + b"\x02" + bytes([15]) + b"cleanup.policy" + bytes([7]) + b"delete" + bytes([0, 5, 0]) + b"\x01"
    + bytes([2]) + b"\x00" + b"\x00" + b"\x00" + b"\x00")
# producer_core: its seeds in corpus/producer_core/ are hand-made operation sequences (see the
# target in src/targets.rs); this script leaves them alone.
# Produce with per-record errors (v8+, KIP-467): INVALID_RECORD on records 0 and 3.
put("produce", "v8-record-errors", bytes([8 - 3]) + struct.pack(">i", 1) + s16(b"t") + struct.pack(">i", 1)
    + struct.pack(">ihqqq", 0, 87, -1, -1, 0) + struct.pack(">i", 2) + struct.pack(">i", 0) + s16(b"bad key")
    + struct.pack(">i", 3) + struct.pack(">h", -1) + s16(b"invalid records") + struct.pack(">i", 0))
put("produce", "v11-record-errors-flexible", bytes([11 - 3]) + b"\x02" + b"\x02t" + b"\x02"
    + struct.pack(">ihqqq", 0, 87, -1, -1, 0) + b"\x02" + struct.pack(">i", 1) + b"\x00" + b"\x00" + b"\x04bad"
    + b"\x00" + b"\x00" + struct.pack(">i", 0) + b"\x00")
put("offset_for_leader_epoch", "v2", bytes([0]) + struct.pack(">ii", 0, 1) + s16(b"t") + struct.pack(">i", 1)
    + struct.pack(">hiiq", 0, 0, 5, 42))
put("offset_for_leader_epoch", "v4-flexible", bytes([2]) + struct.pack(">i", 0) + b"\x02" + b"\x02t" + b"\x02"
    + struct.pack(">hiiq", 0, 0, 5, 42) + b"\x00" + b"\x00" + b"\x00")

# consumer_protocol: [even: subscription, odd: assignment] + the embedded bytes (broker-* seeds:
# captured with the group APIs above).
put("consumer_protocol", "empty", b"")
put("consumer_protocol", "assignment-no-bytes", bytes([1]))
put("consumer_protocol", "subscription-v0", bytes([0]) + struct.pack(">hi", 0, 1) + s16(b"t") + struct.pack(">i", -1))
put("consumer_protocol", "assignment-v0", bytes([1]) + struct.pack(">hi", 0, 1) + s16(b"t") + struct.pack(">iii", 2, 0, 1)
    + struct.pack(">i", 0))
put("consumer_protocol", "subscription-v9-newer", bytes([0]) + struct.pack(">hi", 9, 0) + struct.pack(">i", -1)
    + struct.pack(">iih", 0, 5, -1) + b"future field")

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
# An lz4 frame without its EndMark, then a valid lz4 batch: the first batch leaves a reused lz4
# decoder inside its frame (wire/tests/fuzz_regressions.rs). The first CRC is left stale on
# purpose: record_batch also walks its input with every CRC recomputed.
lz4 = blob("lz4.bin")
assert lz4[-4:] == b"\x00\x00\x00\x00", "lz4.bin ends with its frame's EndMark"
no_end_mark = lz4[:8] + struct.pack(">i", len(lz4) - 4 - 12) + lz4[12:-4]
put("record_batch", "lz4-without-end-mark-then-valid", no_end_mark + lz4)
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

# scram: [mechanism: even SHA-256, odd SHA-512][server-first] 0x00 [server-final], for the user,
# password and client nonce of scram() in fuzz/src/targets.rs (RFC 5802 section 3).
SCRAM_USER, SCRAM_PASSWORD, SCRAM_NONCE = b"alice", b"alice-secret", b"fuzzClientNonce0123456789"
SCRAM_SALT = base64.b64encode(b"fuzz-salt-16byte")

def scram_exchange(hash_name, server_nonce=b"ServerNonce%$", iterations=4096, extensions=b""):
    """(server-first, server-final) of a valid exchange."""
    server_first = b"r=" + SCRAM_NONCE + server_nonce + b",s=" + SCRAM_SALT + b",i=%d" % iterations + extensions
    client_final_bare = b"c=biws,r=" + SCRAM_NONCE + server_nonce
    auth_message = b"n=" + SCRAM_USER + b",r=" + SCRAM_NONCE + b"," + server_first + b"," + client_final_bare
    salted = hashlib.pbkdf2_hmac(hash_name, SCRAM_PASSWORD, base64.b64decode(SCRAM_SALT), iterations)
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    signature = hmac.new(server_key, auth_message, hash_name).digest()
    return server_first, b"v=" + base64.b64encode(signature)

first256, final256 = scram_exchange("sha256")
first512, final512 = scram_exchange("sha512")
put("scram", "valid-sha256", bytes([0]) + first256 + b"\x00" + final256)
put("scram", "valid-sha512", bytes([1]) + first512 + b"\x00" + final512)
first_ext, final_ext = scram_exchange("sha256", extensions=b",x=ignored")
put("scram", "valid-sha256-extensions", bytes([0]) + first_ext + b"\x00" + final_ext + b",y=later")
tampered = final256[:-3] + (b"A" if final256[-3:-2] != b"A" else b"B") + final256[-2:]
put("scram", "tampered-signature", bytes([0]) + first256 + b"\x00" + tampered)
put("scram", "server-error", bytes([0]) + first256 + b"\x00e=invalid-proof")
put("scram", "first-only", bytes([1]) + first512)
put("scram", "nonce-mismatch", bytes([0]) + b"r=otherNonce,s=" + SCRAM_SALT + b",i=4096\x00" + final256)
put("scram", "too-few-iterations", bytes([0]) + b"r=" + SCRAM_NONCE + b"x,s=" + SCRAM_SALT + b",i=1")
put("scram", "mandatory-extension", bytes([0]) + b"m=ext," + first256)
put("scram", "not-utf8", bytes([0]) + b"r=\xff\xfe")
put("scram", "empty", b"")

# pem: [selector: bit 0 cert, bit 1 key] CA 0x00 cert 0x00 key; see pem() in fuzz/src/targets.rs.
def pem_file(name):
    with open(os.path.join(ROOT, "fuzz/seeds/pem", name), "rb") as f:
        return f.read()

ca, cert, key = pem_file("ca.pem"), pem_file("client.pem"), pem_file("client.key")
def pem_seed(selector, ca_text, cert_text=b"", key_text=b""):
    return bytes([selector]) + ca_text + b"\x00" + cert_text + b"\x00" + key_text

put("pem", "ca-only", pem_seed(0, ca))
put("pem", "mtls", pem_seed(3, ca, cert, key))
put("pem", "mtls-sec1-key", pem_seed(3, ca, cert, pem_file("client-sec1.key")))
put("pem", "mtls-crlf-chain", pem_seed(3, ca.replace(b"\n", b"\r\n"), cert + ca, b"  " + key + b"\n\n"))
put("pem", "key-of-another-cert", pem_seed(3, ca, cert, pem_file("other.key")))
put("pem", "cert-without-key", pem_seed(1, ca, cert))
put("pem", "key-without-cert", pem_seed(2, ca, b"", key))
put("pem", "key-in-cert-field", pem_seed(3, ca, key, key))
put("pem", "cert-in-key-field", pem_seed(3, ca, cert, cert))
put("pem", "truncated-ca", pem_seed(0, ca[: len(ca) // 2]))
put("pem", "bad-base64-key", pem_seed(3, ca, cert, key.replace(b"M", b"!", 1)))
put("pem", "no-end-line", pem_seed(3, ca, cert, key.split(b"-----END")[0]))
put("pem", "empty", pem_seed(0, b""))

# json_rows: records split at 0xFF, each [flags] + bytes; see json_rows() in
# fuzz/src/connector_targets.rs (bit 0 tombstone, 1 key, 2 header, 3 null header, 4-5 timestamp).
def rows(*records):
    return b"\xff".join(bytes([flags]) + body for flags, body in records)

put("json_rows", "objects", rows(
    (0x10, b'{"id":"a","amount":100.10,"ok":true,"lines":[{"sku":"x"}],"note":null}'),
    (0x16, b'{"id":"b","amount":1E5,"ok":false}'),
    (0x20, b'{"id":"c"}'),
    (0x01, b""),
    (0x08, b'{"amount":-0.0,"lines":{"any":"json"},"note":[1,2]}'),
))
put("json_rows", "schema-mismatches", rows(
    (0x00, b'{"id":"a","n":1}'),
    (0x00, b'{"id":"b","n":1,"new":true}'),
    (0x00, b'{"id":2}'),
    (0x00, b'"not an object"'),
    (0x00, b'{"id":"c","id":"d"}'),
    (0x00, b'{"id":"e","n":{"nested":{"x":1,"x":2}}}'),
    (0x42, b'{"id":"f","n":2}'),
))
put("json_rows", "raw", rows(
    (0x02, b"\x00\x01binary"),
    (0x00, b'{"now":"an object"}'),
    (0x04, b"[1,2,3]"),
    (0x30, b"caf\xc3\xa9"),
    (0x01, b"tombstone-key"),
))
put("json_rows", "bad-names", rows((0x00, b'{"Topic":1,"_SLUICE_x":2}')) + b"\xff" + rows((0x00, b'{"":1}')))
put("json_rows", "reserved-prefix", rows((0x00, b'{"_sluice_key":1}'), (0x00, b'{"ok":1}')))
put("json_rows", "numbers", rows((0x00, b'{"a":1e400,"b":-12345678901234567890123,"c":0.1e-2,"d":1E+2}'),
                                 (0x00, b'{"a":2,"b":3,"c":4,"d":5}')))
put("json_rows", "empty", b"")

# zstd: the first byte picks the mode (0 frames as given, 1 our frame with edits, 2 round trip).
def zstd_raw_frame(content, window_exponent=0, checksum=None, last=True):
    header = struct.pack("<I", 0xFD2FB528) + bytes([0x04 if checksum is not None else 0, window_exponent << 3])
    block = struct.pack("<I", (len(content) << 3) | int(last))[:3] + content
    return header + block + (struct.pack("<I", checksum) if checksum is not None else b"")
def zstd_rle_frame(byte, count):
    # Single segment with a 2-byte content size (value - 256), one RLE last block.
    return (struct.pack("<I", 0xFD2FB528) + bytes([0x60]) + struct.pack("<H", count - 256)
            + struct.pack("<I", (count << 3) | (1 << 1) | 1)[:3] + bytes([byte]))
text = b"".join(b'{"id":%d,"name":"customer-%d","note":"%s"}\n' % (i, i % 17, b"ab" * (i % 40)) for i in range(60))
put("zstd", "raw-frame", bytes([0]) + zstd_raw_frame(b"hello zstd"))
put("zstd", "rle-frame", bytes([0]) + zstd_rle_frame(0x61, 1000))
put("zstd", "skippable-then-frames", bytes([0]) + struct.pack("<II", 0x184D2A50, 3) + b"abc"
    + zstd_raw_frame(b"one ") + zstd_raw_frame(b"two", window_exponent=16))
put("zstd", "bad-checksum", bytes([0]) + zstd_raw_frame(b"checked", checksum=0x12345678))
put("zstd", "edited-frame", bytes([1, 2]) + struct.pack("<HB", 20, 0x00) + struct.pack("<HB", 40, 0xff) + text)
put("zstd", "unedited-frame", bytes([1, 0]) + text)
put("zstd", "round-trip", bytes([2]) + text)
put("zstd", "empty", b"")

# pg_numeric: JSON number text into PostgreSQL's binary numeric (the Postgres destination);
# edges of numeric's range and texts that are not JSON numbers.
for i, text in enumerate([b"0", b"-0", b"1.50", b"1.5e3", b"-1.5E-3", b"12345678901234567890.000000000000000001",
                          b"1e131071", b"1e131072", b"1e-16383", b"1e-16384", b"2E+2", b"0.0001", b"10000", b"",
                          b"-", b"1.", b".5", b"1e", b"1e+", b"abc", b"00", b"-01", b"1e99999999999999999999"]):
    put("pg_numeric", "seed-%02d" % i, text)

# metrics_http: requests to the metrics endpoint (`sluice read --metrics-addr`): whole, lenient,
# cut short, malformed, and one past the 8 KiB limit.
for i, text in enumerate([b"GET /metrics HTTP/1.1\r\nHost: localhost:9464\r\nAccept: */*\r\n\r\n",
                          b"HEAD /metrics?x=1 HTTP/1.0\n\n", b"GET / HTTP/1.1\r\n\r\n", b"GET /metrics HTTP/1.1\r\n",
                          b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", b"GET metrics HTTP/1.1\r\n\r\n",
                          b"GET / HTTP/2\r\n\r\n", b"\r\n\r\n", b"GET /\xff HTTP/1.1\r\n\r\n",
                          b"GET / HTTP/1.1\r\nX: " + b"a" * 8200 + b"\r\n\r\n", b""]):
    put("metrics_http", "seed-%02d" % i, text)

# write_position: offsets-topic values of `sluice write` (a position, another version), a JSON
# line with mapped fields, a `sluice read` row, an RFC 3339 time, deep nesting.
for i, text in enumerate([
        b'{"version":1,"topic":"orders","byte_offset":1234,"line":20,"records":19,"dead_letters":1,"input":{"path":"/data/in.jsonl","device":2049,"inode":131,"prefix_bytes":1234,"prefix_fnv1a64":"af63bd4c8601b7df"}}',
        b'{"version":2,"topic":"t","byte_offset":0,"line":0,"records":0,"dead_letters":0,"input":{"path":"","device":0,"inode":0,"prefix_bytes":0,"prefix_fnv1a64":""}}',
        b'{"k":"a","t":"2026-12-01T21:54:31.123+02:00","h":[["a","b"],["c",null]]}',
        b'{"topic":"t","partition":2,"offset":5,"tombstone":false,"_sluice_event_id":"x","_sluice_event_ts":{"millis":1,"type":"create_time"},"_sluice_headers":[[{"utf8":"h"},{"base64":"/wA="}]],"_sluice_key":{"utf8":"k"},"payload":{"base64":"AAE="}}',
        b"1970-01-01T00:00:00Z", b"[" * 20]):
    put("write_position", "seed-%02d" % i, text)

print("corpus written to", CORPUS)

# Schema registry payloads (connector targets; see fuzz/src/connector_targets.rs).
def pv(n):
    """An unsigned varint (Protobuf's)."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n == 0:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)

def zz(n):
    """A zigzag varint (Avro's long, Protobuf's sint64)."""
    return pv((n << 1) ^ (n >> 63))

def astr(s):
    b = s.encode() if isinstance(s, str) else s
    return zz(len(b)) + b

put("confluent_framing", "avro", b"\x00\x00\x00\x00\x07" + astr("hello"))
put("confluent_framing", "protobuf-first", b"\x00\x00\x00\x01\x00\x00\x08\x96\x01")
put("confluent_framing", "protobuf-first-long-form", b"\x00\x00\x00\x01\x00\x02\x00\x08\x96\x01")
put("confluent_framing", "protobuf-nested", b"\x00\x7f\xff\xff\xff" + zz(3) + zz(1) + zz(0) + zz(70000) + b"\x08\x01")
put("confluent_framing", "unframed-json", b'{"a":1}')
put("confluent_framing", "short", b"\x00\x00\x01")

put("avro_schema", "record", b'{"type":"record","name":"r","namespace":"a.b","fields":[{"name":"x","type":["null",{"type":"array","items":{"type":"map","values":"r"}}]},{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},{"name":"f","type":{"type":"fixed","name":"F","size":16,"logicalType":"uuid"}},{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},{"name":"t","type":{"type":"long","logicalType":"timestamp-micros"}}]}')
put("avro_schema", "reference", b'{"type":"enum","name":"Color","namespace":"shop","symbols":["RED"]}\x00{"type":"record","name":"shop.Item","fields":[{"name":"c","type":"Color"},{"name":"d","type":"shop.Color"}]}')
put("avro_schema", "primitive", b'"string"')
put("avro_schema", "union", b'["null","int",{"type":"string","logicalType":"uuid"}]')

# avro_datum: [schema pick] + datum; the picks index AVRO_DATUM_SCHEMAS.
all_types = (zz(0) * 0 + b"\x01" + zz(-5) + zz(1 << 40) + struct.pack("<f", 1.5) + struct.pack("<d", -2.5)
             + astr(b"\x00\xff") + astr("s") + zz(2) + b"abcd" + zz(2) + zz(0) + zz(1) + zz(0)
             + zz(-2) + zz(8) + astr("k") + zz(1) + b"wxyz" + astr("j") + zz(0) + zz(0) + zz(1) + zz(99))
put("avro_datum", "all-types", b"\x00" + all_types)
logical = (astr(b"\xff\x6a") + b"\x00\x00\x00\x00\x00\x00\x30\x39" + astr("6f1c2e0a-0000-4000-8000-000000000001")
           + bytes(range(16)) + zz(19000) + zz(1000) + zz(2000) + zz(1700000000000) + zz(1700000000000000)
           + zz(-1) + zz(5) + zz(6))
put("avro_datum", "logical", b"\x01" + logical)
put("avro_datum", "linked-list", b"\x02" + zz(1) + zz(1) + zz(2) + zz(1) + zz(3) + zz(0))
put("avro_datum", "many-nulls", b"\x03" + zz(1000) + zz(0))
put("avro_datum", "billion-nulls", b"\x03" + zz(1000000000) + zz(0))
put("avro_datum", "empty-records", b"\x04" + zz(1) + astr("k") + zz(-3) + zz(0) + zz(0) + zz(0))
put("avro_datum", "nested", b"\x05" + zz(1) + zz(1) + zz(1) + astr("a") + zz(2) + astr("x") + zz(0) + zz(0) + zz(0))
put("avro_datum", "own-schema", b"\xf0" + b'{"type":"record","name":"r","fields":[{"name":"a","type":"long"},{"name":"b","type":"string"}]}' + b"\xff" + zz(64) + astr("foo"))
put("avro_datum", "huge-string", b"\xf0" + b'"string"' + b"\xff" + zz(2 << 30))

# avro_rows: [schema pick] then pieces [flags][datum] split at 0xFF (flags: 1 tombstone,
# 2 unframed, 4 unknown id); data pieces here avoid 0xFF.
put("avro_rows", "list-rows", b"\x02" + b"\x00" + zz(1) + zz(0) + b"\xff" + b"\x00" + zz(2) + zz(1) + zz(3) + zz(0)
    + b"\xff\x01" + b"\xff\x02" + b'{"v":1}' + b"\xff\x04" + zz(1) + zz(0) + b"\xff\x40" + zz(5) + zz(0))
put("avro_rows", "tombstone-first", b"\x02" + b"\x01" + b"\xff\x00" + zz(7) + zz(0))
put("avro_rows", "not-a-record", b"\x03" + b"\x00" + zz(3) + zz(0))
put("avro_rows", "nested-rows", b"\x00" + b"\x00" + all_types.replace(b"\xff", b"\x7f"))
put("avro_rows", "logical-rows", b"\x01" + b"\x00" + logical.replace(b"\xff", b"\x7f"))

put("registry_response", "by-id", b'{"schema":"{\\"type\\":\\"record\\",\\"name\\":\\"r\\",\\"fields\\":[{\\"name\\":\\"a\\",\\"type\\":\\"int\\"}]}"}')
put("registry_response", "version", b'{"subject":"s","version":2,"id":7,"schemaType":"PROTOBUF","schema":"syntax = \\"proto3\\";","references":[{"name":"a.proto","subject":"a","version":1}]}')
put("registry_response", "error", b'{"error_code":40403,"message":"Schema not found"}')
put("registry_response", "json-schema", b'{"schemaType":"JSON","schema":"{}","references":null}')

# Protobuf (connector targets protobuf_rows and protobuf_schema).
pz = zz

def fv(number, value):
    return pv(number << 3) + pv(value)

def fl(number, data):
    data = data.encode() if isinstance(data, str) else data
    return pv((number << 3) | 2) + pv(len(data)) + data

# protobuf_rows: [schema pick: 0 proto3 (Node, Kinds), 1 proto2 (Old)] then pieces
# [flags][message indexes][message] split at 0xFF (flags as for avro_rows); no 0xFF inside.
node = fv(1, 3)
for _ in range(50):
    node = fv(1, 1) + fl(2, node)
kinds = (fv(3, 7) + fl(9, "hi") + fv(8, 1) + pv(18 << 3) + pz(-5) + fv(30, 1) + fl(31, "x")
    + fl(34, fv(1, 4) + fl(2, fv(1, 3))) + fl(35, pz(1) + pz(-2)) + fl(36, "a") + fl(36, "b")
    + fl(37, fv(1, 9)) + fl(38, fv(1, 1709214330) + fv(2, 5)) + fl(39, fl(1, b"\x01\x02") + fv(3, 2))
    + fl(40, fv(1, 2024) + fv(2, 2) + fv(3, 29)) + fl(41, b"\x09" + struct.pack("<d", 1.5))
    + fl(42, fl(1, fl(1, "k") + fl(2, fl(3, "v")))) + fl(43, fl(1, "type.googleapis.com/x") + fl(2, b"\x08\x01")))
assert b"\xff" not in kinds
put("protobuf_rows", "kinds", b"\x00" + b"\x00" + pz(1) + pz(1) + kinds + b"\xff\x00" + pz(1) + pz(1)
    + b"\xff\x01" + b"\xff\x02" + b'{"v":1}' + b"\xff\x04\x00" + b"\xff\x00" + pz(1) + pz(9))
put("protobuf_rows", "node-chain", b"\x00" + b"\x00\x00" + node + b"\xff\x00\x00" + fv(1, 1))
put("protobuf_rows", "tombstone-first", b"\x00" + b"\x01" + b"\xff\x00\x00" + fv(1, 2))
put("protobuf_rows", "proto2", b"\x01" + b"\x00\x00" + fv(1, 1) + fl(2, "x") + fv(3, 1) + fl(3, b"\x02\x03")
    + fl(4, fv(1, 2)) + b"\xff\x00\x00")

# protobuf_schema: [descriptor length u16 BE][FileDescriptorProto][message].
def pfield(name, number, label, kind, type_name=""):
    out = fl(1, name) + fv(3, number) + fv(4, label) + fv(5, kind)
    return out + (fl(6, type_name) if type_name else b"")

m = fl(1, "M") + fl(2, pfield("a", 1, 1, 3)) + fl(2, pfield("b", 2, 1, 9)) + fl(2, pfield("c", 3, 3, 11, ".t.M"))
descriptor = fl(1, "t.proto") + fl(2, "t") + fl(4, m) + fl(12, "proto3")
put("protobuf_schema", "recursive", struct.pack(">H", len(descriptor)) + descriptor + fv(1, 5) + fl(2, "x") + fl(3, fv(1, 1)))
put("protobuf_schema", "not-a-descriptor", b"\x00\x10" + b'syntax = "proto3";')

# avro_json_encode: [schema pick] + a JSON value in the forms `sluice read` writes.
put("avro_json_encode", "all-types", b"\x00" + b'{"n":null,"b":true,"i":-5,"l":12345678901,"f":1.5,"d":-0.25,"by":{"base64":"/wA="},"s":"x","e":"B","fx":"abcd","a":["A","C"],"m":{"k":"v","z":null,"f":{"utf8":"wxyz"}},"o":7}')
put("avro_json_encode", "logical", b"\x01" + b'{"dec":-1.5,"decf":"12.34","u":"123e4567-e89b-12d3-a456-426614174000","uf":"123e4567-e89b-12d3-a456-426614174000","date":"2024-02-29","tm":"13:45:30.123","tu":"00:00:00.000001","tsm":"2024-02-29T13:45:30.123Z","tsu":1,"tsn":"1970-01-01T00:00:00.000000001Z","lm":"2024-02-29T13:45:30.123","lu":"0001-01-01T00:00:00.000000"}')
put("avro_json_encode", "list", b"\x02" + b'{"v":1,"next":{"v":2,"next":null}}')
put("avro_json_encode", "nested", b"\x05" + b'[[{"a":null,"b":1,"c":"x","d":true}],[]]')

# protobuf_json_encode: [bit 0 schema (0 proto3, 1 proto2), bit 1 message] + a JSON value.
put("protobuf_json_encode", "kinds", b"\x02" + b'{"s1":1.5,"s3":-7,"s4":"18446744073709551615","s8":true,"s9":"x","s12":{"base64":"/wA="},"s17":-3,"e":"A","o2":{"v":1},"opt":5,"m":{"-4":{"v":2}},"packed":[1,-2],"strings":["a"],"nodes":[{"v":3,"next":{"v":4}}],"at":"2024-02-29T13:45:30.000000001Z","price":"-1.50","day":"2024-02-29","w":2.5,"st":{"k":[1,"two",null,{"x":true}]}}')
put("protobuf_json_encode", "node", b"\x00" + b'{"v":1,"next":{"v":2,"next":null}}')
put("protobuf_json_encode", "proto2", b"\x01" + b'{"a":1,"b":"x","c":[1,2],"d":{"a":2}}')
