// The names of every fuzz target, as used for `fuzz/fuzz_targets/<name>.rs` and
// `fuzz/corpus/<name>/`. Included next to `targets.rs` (wire targets) and `connector_targets.rs`
// (connector targets) by `fuzz/src/lib.rs` and by both replay tests; no inner attributes or `//!`
// docs here, `include!` does not allow them.

/// Targets whose code is in `targets.rs` (depends on `sluice_wire` only), replayed by
/// `wire/tests/fuzz_corpus_replay.rs`.
pub const TARGETS: &[&str] = &[
    "frame",
    "api_versions",
    "metadata",
    "list_offsets",
    "fetch",
    "produce",
    "create_topics",
    "delete_topics",
    "delete_records",
    "describe_configs",
    "create_partitions",
    "sasl_handshake",
    "sasl_authenticate",
    "offset_for_leader_epoch",
    "init_producer_id",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "txn_offset_commit",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "consumer_group_heartbeat",
    "consumer_protocol",
    "record_batch",
    "read_committed",
    "fetch_state",
    "producer_core",
    "scram",
    "pem",
    "zstd",
    "http_response",
    "sts_response",
    "aws_credentials_json",
    "token_response",
];

/// Targets whose code is in `connector_targets.rs` (depends on the `sluice` connector crate,
/// which `sluice-wire` cannot), replayed by `connector/tests/fuzz_corpus_replay.rs`.
pub const CONNECTOR_TARGETS: &[&str] = &[
    "json_rows",
    "pg_numeric",
    "metrics_http",
    "write_position",
    "confluent_framing",
    "avro_schema",
    "avro_datum",
    "registry_response",
    "avro_rows",
    "protobuf_rows",
    "protobuf_schema",
    "avro_json_encode",
    "protobuf_json_encode",
];
