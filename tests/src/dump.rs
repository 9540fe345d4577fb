//! What `tests/java/DumpConsumer.java` printed, record by record: the Java consumer's view of a
//! topic, for differential tests of what this client wrote.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{broker_address, run_java};

/// One record as the Java consumer saw it; key, value and header values are standard base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedRecord {
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub timestamp_type: String,
    pub key: Option<String>,
    pub value: Option<String>,
    pub headers: Vec<(String, Option<String>)>,
}

/// The Java consumer's records of `topic` on the test broker (by partition, then offset) and
/// its end offsets, under `isolation` (`read_committed` or `read_uncommitted`).
pub fn java_dump(topic: &str, isolation: &str) -> (Vec<DumpedRecord>, BTreeMap<i32, i64>) {
    java_dump_at(&broker_address(), topic, isolation)
}

/// [`java_dump`] against another broker.
pub fn java_dump_at(bootstrap: &str, topic: &str, isolation: &str) -> (Vec<DumpedRecord>, BTreeMap<i32, i64>) {
    parse(&run_java("DumpConsumer", &[bootstrap, topic, isolation]))
}

fn parse(output: &str) -> (Vec<DumpedRecord>, BTreeMap<i32, i64>) {
    let mut records = Vec::new();
    let mut ends = BTreeMap::new();
    for line in output.lines().filter(|line| !line.trim().is_empty()) {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("bad DumpConsumer line {line:?}: {e}"));
        if let Some(end_offsets) = value.get("end_offsets") {
            for (partition, offset) in end_offsets.as_object().expect("end offsets object") {
                ends.insert(partition.parse().expect("partition"), offset.as_i64().expect("offset"));
            }
            continue;
        }
        let text = |field: &str| value.get(field).and_then(Value::as_str).map(str::to_string);
        records.push(DumpedRecord {
            partition: value["partition"].as_i64().expect("partition") as i32,
            offset: value["offset"].as_i64().expect("offset"),
            timestamp: value["timestamp"].as_i64().expect("timestamp"),
            timestamp_type: text("timestamp_type").expect("timestamp type"),
            key: text("key"),
            value: text("value"),
            headers: value["headers"]
                .as_array()
                .expect("headers")
                .iter()
                .map(|h| (h[0].as_str().expect("header key").to_string(), h[1].as_str().map(str::to_string)))
                .collect(),
        });
    }
    (records, ends)
}
