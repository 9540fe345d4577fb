//! The reliability checker: compares what the connector committed to its destination with what
//! the broker holds, read independently by the Java consumer, and counts per partition what went
//! wrong, in the terms Jepsen's Kafka checker uses.
//!
//! - **lost**: a committed record below the connector's certified position that is missing from
//!   the output (the connector claims to be past it);
//! - **duplicate**: an offset that appears more than once in the committed output;
//! - **nonmonotonic**: an output row whose offset is not above the row before it (within a
//!   partition, in segment order);
//! - **aborted_read**: a row whose record belongs to an aborted transaction (seen by the Java
//!   consumer in read_uncommitted but not in read_committed);
//! - **unseen_at_end**: a committed record at or beyond the connector's certified position when
//!   the check runs (after a final catch-up this must be zero too);
//! - **mismatched**: a row at an offset the broker does not hold as a data record, or whose
//!   payload differs from the record the broker holds there.
//!
//! The output is read from a `LocalDirectory` (layout in `connector/src/destination.rs`): the
//! store's continuous checkpoints and the continuous segments below them, or the segments of the
//! latest finished bounded run. The broker side comes from `tests/java/DumpConsumer.java`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::run_java;

/// The records the broker holds for one topic, read by the Java consumer.
#[derive(Debug, Default, Clone)]
pub struct BrokerView {
    /// Committed data records per partition: offset -> value (parsed as JSON when it is JSON,
    /// else `Value::Null` and only the offset is compared).
    pub committed: BTreeMap<i32, BTreeMap<i64, Value>>,
    /// Offsets of records of aborted transactions per partition.
    pub aborted: BTreeMap<i32, BTreeSet<i64>>,
    /// The read_committed end offsets (last stable offsets) the Java consumer read up to.
    pub end_offsets: BTreeMap<i32, i64>,
}

impl BrokerView {
    /// Runs `DumpConsumer` in read_committed and read_uncommitted against `bootstrap`.
    pub fn read(bootstrap: &str, topic: &str) -> BrokerView {
        let committed = parse_dump(&run_java("DumpConsumer", &[bootstrap, topic, "read_committed"]));
        let uncommitted = parse_dump(&run_java("DumpConsumer", &[bootstrap, topic, "read_uncommitted"]));
        let mut view = BrokerView { end_offsets: committed.end_offsets, ..BrokerView::default() };
        for (partition, records) in &uncommitted.records {
            let committed_offsets = committed.records.get(partition);
            // read_uncommitted reads further (to the high watermark): only offsets below the
            // last stable offset can be called aborted.
            let lso = view.end_offsets.get(partition).copied().unwrap_or(0);
            let aborted: BTreeSet<i64> = records
                .keys()
                .filter(|offset| **offset < lso && !committed_offsets.is_some_and(|c| c.contains_key(offset)))
                .copied()
                .collect();
            view.aborted.insert(*partition, aborted);
        }
        view.committed = committed.records;
        for partition in view.end_offsets.keys() {
            view.committed.entry(*partition).or_default();
            view.aborted.entry(*partition).or_default();
        }
        view
    }

    /// Committed data records in all partitions.
    pub fn committed_records(&self) -> usize {
        self.committed.values().map(BTreeMap::len).sum()
    }
}

struct Dump {
    records: BTreeMap<i32, BTreeMap<i64, Value>>,
    end_offsets: BTreeMap<i32, i64>,
}

fn parse_dump(text: &str) -> Dump {
    let mut dump = Dump { records: BTreeMap::new(), end_offsets: BTreeMap::new() };
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("DumpConsumer line {line:?}: {e}"));
        if let Some(ends) = row.get("end_offsets").and_then(Value::as_object) {
            for (partition, end) in ends {
                let partition = partition.parse().expect("partition number");
                dump.end_offsets.insert(partition, end.as_i64().expect("end offset"));
            }
            continue;
        }
        let partition = i32::try_from(row["partition"].as_i64().expect("partition")).expect("partition fits i32");
        let offset = row["offset"].as_i64().expect("offset");
        let value = row["value"]
            .as_str()
            .and_then(base64_decode)
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
        dump.records.entry(partition).or_default().insert(offset, value);
    }
    dump
}

/// What the connector committed for one topic.
#[derive(Debug, Default, Clone)]
pub struct OutputView {
    /// Rows per partition in segment order: (offset, the row).
    pub rows: BTreeMap<i32, Vec<(i64, Value)>>,
    /// The certified next offset per partition.
    pub certified: BTreeMap<i32, i64>,
}

impl OutputView {
    /// The committed continuous output of `topic` in the destination `dest`: the checkpoints in
    /// `_sluice/checkpoints.json` and the continuous segments below them. A segment that
    /// straddles a checkpoint is a broken invariant and panics.
    /// A topic that a consumer group's workers write has its checkpoints in per-partition files
    /// (`_sluice/partitions/<topic>/p<partition>.json`) instead.
    pub fn continuous(dest: &Path, topic: &str) -> OutputView {
        let certified = match shared_checkpoints(dest, topic) {
            Some(certified) => certified,
            None => {
                let store = read_store(dest);
                next_offsets(&store["topics"][topic]["continuous"]["partitions"])
            }
        };
        let mut view = OutputView { rows: BTreeMap::new(), certified };
        for (name, partition, first, last) in segments(dest, topic, None) {
            let next = view.certified.get(&partition).copied().unwrap_or(0);
            if first >= next {
                continue; // written but not certified: not committed output
            }
            assert!(last < next, "segment {name} straddles the certified offset {next}");
            view.rows.entry(partition).or_default().extend(read_rows(dest, topic, &name));
        }
        view
    }

    /// The output of the latest bounded run of `topic`, which must have finished.
    pub fn bounded(dest: &Path, topic: &str) -> OutputView {
        let store = read_store(dest);
        let section = &store["topics"][topic]["bounded"];
        assert_eq!(section["finished"], true, "the bounded run of {topic} did not finish: {section}");
        let run = section["run"].as_u64().expect("bounded run number");
        let certified = next_offsets(&section["checkpoints"]["partitions"]);
        let mut view = OutputView { rows: BTreeMap::new(), certified };
        for (name, partition, _, _) in segments(dest, topic, Some(run)) {
            view.rows.entry(partition).or_default().extend(read_rows(dest, topic, &name));
        }
        view
    }

    pub fn row_count(&self) -> usize {
        self.rows.values().map(Vec::len).sum()
    }
}

/// The certified next offsets of a topic written by a group, or `None` if it is not.
fn shared_checkpoints(dest: &Path, topic: &str) -> Option<BTreeMap<i32, i64>> {
    let dir = dest.join("_sluice/partitions").join(topic);
    let entries = fs::read_dir(&dir).ok()?;
    let mut certified = BTreeMap::new();
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("list {}: {e}", dir.display()));
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(partition) = name.strip_prefix('p').and_then(|rest| rest.strip_suffix(".json")) else { continue };
        let partition: i32 = partition.parse().unwrap_or_else(|_| panic!("partition file name {name}"));
        let bytes = fs::read(entry.path()).unwrap_or_else(|e| panic!("read {name}: {e}"));
        let file: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
        if let Some(next) = file["next_offset"]["next_offset"].as_i64() {
            certified.insert(partition, next);
        }
    }
    Some(certified)
}

fn read_store(dest: &Path) -> Value {
    let path = dest.join("_sluice/checkpoints.json");
    let bytes = fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn next_offsets(partitions: &Value) -> BTreeMap<i32, i64> {
    let Some(partitions) = partitions.as_object() else { return BTreeMap::new() };
    partitions
        .iter()
        .map(|(partition, checkpoint)| {
            (partition.parse().expect("partition key"), checkpoint["next_offset"].as_i64().expect("next_offset"))
        })
        .collect()
}

/// Segment files `(name, partition, first, last)` of a topic, sorted by partition then first
/// offset: continuous ones (`run == None`) or those of bounded run `run`.
fn segments(dest: &Path, topic: &str, run: Option<u64>) -> Vec<(String, i32, i64, i64)> {
    let dir = dest.join(topic).join("segments");
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(error) => panic!("list {}: {error}", dir.display()),
    };
    let prefix = run.map(|run| format!("r{run:010}-"));
    let mut found = Vec::new();
    for entry in entries {
        let name = entry.expect("segment entry").file_name().to_string_lossy().into_owned();
        let rest = match &prefix {
            Some(prefix) => match name.strip_prefix(prefix.as_str()) {
                Some(rest) => rest,
                None => continue,
            },
            None if name.starts_with('p') => name.as_str(),
            None => continue,
        };
        let Some(stem) = rest.strip_suffix(".jsonl").and_then(|s| s.strip_prefix('p')) else { continue };
        let parts: Vec<&str> = stem.split('-').collect();
        let [partition, first, last] = parts[..] else { panic!("unexpected segment name {name}") };
        found.push((
            name.clone(),
            partition.parse().expect("segment partition"),
            first.parse().expect("segment first offset"),
            last.parse().expect("segment last offset"),
        ));
    }
    found.sort_by_key(|(_, partition, first, _)| (*partition, *first));
    found
}

fn read_rows(dest: &Path, topic: &str, name: &str) -> Vec<(i64, Value)> {
    let path = dest.join(topic).join("segments").join(name);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: bad row {line:?}: {e}"));
            (row["offset"].as_i64().unwrap_or_else(|| panic!("{name}: row without offset: {line}")), row)
        })
        .collect()
}

/// The five counts of the issue, plus mismatched rows, for one partition.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub checked: usize,
    pub lost: usize,
    pub duplicate: usize,
    pub nonmonotonic: usize,
    pub aborted_read: usize,
    pub unseen_at_end: usize,
    pub mismatched: usize,
}

impl Counts {
    pub fn is_clean(&self) -> bool {
        self.lost + self.duplicate + self.nonmonotonic + self.aborted_read + self.unseen_at_end + self.mismatched == 0
    }

    fn add(&mut self, other: &Counts) {
        self.checked += other.checked;
        self.lost += other.lost;
        self.duplicate += other.duplicate;
        self.nonmonotonic += other.nonmonotonic;
        self.aborted_read += other.aborted_read;
        self.unseen_at_end += other.unseen_at_end;
        self.mismatched += other.mismatched;
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "checked {} lost {} duplicate {} nonmonotonic {} aborted-read {} unseen-at-end {} mismatched {}",
            self.checked,
            self.lost,
            self.duplicate,
            self.nonmonotonic,
            self.aborted_read,
            self.unseen_at_end,
            self.mismatched
        )
    }
}

/// The checker's verdict: counts per partition and up to a few examples of each problem.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub partitions: BTreeMap<i32, Counts>,
    pub examples: Vec<String>,
}

impl Report {
    pub fn total(&self) -> Counts {
        let mut total = Counts::default();
        for counts in self.partitions.values() {
            total.add(counts);
        }
        total
    }

    pub fn is_clean(&self) -> bool {
        self.partitions.values().all(Counts::is_clean)
    }

    /// Fails the test with every count and the examples unless all counts are zero.
    pub fn assert_clean(&self, context: &str) {
        assert!(self.is_clean(), "{context}: the checker found problems:\n{self}");
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (partition, counts) in &self.partitions {
            writeln!(f, "  partition {partition}: {counts}")?;
        }
        for example in &self.examples {
            writeln!(f, "  e.g. {example}")?;
        }
        Ok(())
    }
}

const MAX_EXAMPLES: usize = 20;

/// Compares the committed output with the broker's records. A row matches its record when every
/// field of the record's JSON object value has the same value in the row (the connector turns a
/// JSON object's fields into columns).
pub fn check(broker: &BrokerView, output: &OutputView) -> Report {
    let mut report = Report::default();
    let mut example = |text: String| {
        if report.examples.len() < MAX_EXAMPLES {
            report.examples.push(text);
        }
    };
    let empty_rows = Vec::new();
    let empty_committed = BTreeMap::new();
    let empty_aborted = BTreeSet::new();
    let partitions: BTreeSet<i32> = broker.committed.keys().chain(output.rows.keys()).copied().collect();
    let mut per_partition = BTreeMap::new();
    for partition in partitions {
        let rows = output.rows.get(&partition).unwrap_or(&empty_rows);
        let committed = broker.committed.get(&partition).unwrap_or(&empty_committed);
        let aborted = broker.aborted.get(&partition).unwrap_or(&empty_aborted);
        let certified = output.certified.get(&partition).copied().unwrap_or(0);
        let mut counts = Counts { checked: committed.len(), ..Counts::default() };

        let mut seen: HashMap<i64, usize> = HashMap::new();
        let mut previous: Option<i64> = None;
        for (offset, row) in rows {
            *seen.entry(*offset).or_default() += 1;
            if previous.is_some_and(|previous| *offset <= previous) {
                counts.nonmonotonic += 1;
                example(format!("partition {partition}: offset {offset} after {previous:?}"));
            }
            previous = Some(*offset);
            if aborted.contains(offset) {
                counts.aborted_read += 1;
                example(format!("partition {partition}: offset {offset} belongs to an aborted transaction"));
            } else if let Some(value) = committed.get(offset) {
                if !payload_matches(value, row) {
                    counts.mismatched += 1;
                    example(format!("partition {partition}: offset {offset}: row {row} differs from record {value}"));
                }
            } else {
                counts.mismatched += 1;
                example(format!("partition {partition}: offset {offset} is not a committed record on the broker"));
            }
        }
        for (offset, times) in &seen {
            if *times > 1 {
                counts.duplicate += times - 1;
                example(format!("partition {partition}: offset {offset} written {times} times"));
            }
        }
        for offset in committed.keys() {
            if seen.contains_key(offset) {
                continue;
            }
            if *offset < certified {
                counts.lost += 1;
                example(format!(
                    "partition {partition}: committed offset {offset} missing below certified {certified}"
                ));
            } else {
                counts.unseen_at_end += 1;
            }
        }
        per_partition.insert(partition, counts);
    }
    report.partitions = per_partition;
    report
}

fn payload_matches(value: &Value, row: &Value) -> bool {
    match value.as_object() {
        Some(fields) => fields.iter().all(|(name, field)| row.get(name).is_some_and(|got| same_value(field, got))),
        None => true,
    }
}

/// Equal JSON, numbers compared by value: a database's numeric column keeps `2e3` as `2000`.
fn same_value(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Number(want), Value::Number(got)) => want == got || want.as_f64() == got.as_f64(),
        (Value::Array(want), Value::Array(got)) => {
            want.len() == got.len() && want.iter().zip(got).all(|(w, g)| same_value(w, g))
        }
        (Value::Object(want), Value::Object(got)) => {
            want.len() == got.len() && want.iter().all(|(k, w)| got.get(k).is_some_and(|g| same_value(w, g)))
        }
        _ => want == got,
    }
}

/// Standard base64 (with or without padding) to bytes; `None` on anything else.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut buffer = 0u32;
    let mut bits = 0;
    for byte in text.bytes().filter(|b| *b != b'=') {
        let digit = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        buffer = (buffer << 6) | u32::from(digit);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn broker() -> BrokerView {
        let mut view = BrokerView::default();
        view.committed.insert(0, (0..5).filter(|o| *o != 2).map(|o| (o, json!({"n": o}))).collect());
        view.aborted.insert(0, BTreeSet::from([2]));
        view.end_offsets.insert(0, 6);
        view
    }

    fn output(offsets: &[i64], certified: i64) -> OutputView {
        let rows = offsets.iter().map(|o| (*o, json!({"offset": o, "n": o}))).collect();
        OutputView { rows: BTreeMap::from([(0, rows)]), certified: BTreeMap::from([(0, certified)]) }
    }

    #[test]
    fn exact_output_is_clean() {
        let report = check(&broker(), &output(&[0, 1, 3, 4], 6));
        assert!(report.is_clean(), "{report}");
        assert_eq!(report.total().checked, 4);
    }

    #[test]
    fn every_kind_of_problem_is_counted() {
        // 1 lost (missing below certified), 0 written twice, 3 before 1, aborted 2 read.
        let report = check(&broker(), &output(&[0, 0, 3, 1, 2], 4));
        let counts = report.partitions[&0];
        assert_eq!(counts.duplicate, 1, "{report}");
        assert_eq!(counts.nonmonotonic, 2, "{report}"); // 0 after 0, 1 after 3
        assert_eq!(counts.aborted_read, 1, "{report}");
        assert_eq!(counts.unseen_at_end, 1, "{report}"); // offset 4 at/after certified 4
        assert_eq!(counts.lost, 0, "{report}");
        let report = check(&broker(), &output(&[0, 3, 4], 6));
        assert_eq!(report.partitions[&0].lost, 1, "{report}");
    }

    #[test]
    fn a_different_payload_is_a_mismatch() {
        let mut out = output(&[0, 1, 3, 4], 6);
        out.rows.get_mut(&0).unwrap()[1].1 = json!({"n": 99});
        assert_eq!(check(&broker(), &out).partitions[&0].mismatched, 1);
    }

    #[test]
    fn base64_decodes() {
        assert_eq!(base64_decode("eyJuIjoxfQ==").as_deref(), Some(&b"{\"n\":1}"[..]));
        assert_eq!(base64_decode("*"), None);
    }
}
