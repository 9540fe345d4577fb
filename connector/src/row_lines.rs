//! Rows rendered straight into JSON Lines: what an epoch holds and a segment file receives.
//!
//! The general way from a record to a line is [`RowDecoder::decode`](crate::rows::RowDecoder::decode)
//! (a `serde_json::Value` tree per payload, fitted to the schema) and then serialising the
//! [`Row`]. Profiling a bounded read of 2 M JSON rows put most of its CPU time in building,
//! hashing and dropping those trees. [`RowDecoder::decode_into`](crate::rows::RowDecoder::decode_into)
//! takes a shortcut for the common payload, a flat JSON object whose keys are columns of the
//! fixed schema: [`LineTemplate::render_flat`] checks the bytes in one pass and copies the text
//! of each value into the line. In a raw resource (its first record was not an object),
//! [`LineTemplate::render_raw`] writes a payload that cannot be an object as bytes without
//! parsing it.
//!
//! The shortcut only takes input it can prove the general way accepts and renders identically:
//! valid UTF-8; strings without escapes (JSON forbids raw control characters and quotes in a
//! string, so such a string is already in the form `serde_json` writes); numbers without an
//! exponent (kept as text by `arbitrary_precision`, so copied as written); `true`, `false`,
//! `null`; every key a column, once, each value of the column's type. Values that are not
//! already in `serde_json`'s form are rewritten into it, without building anything: nested
//! objects and arrays (for `json` columns) are checked and written minified, with no duplicate
//! key at any depth and at most [`MAX_NESTING`] levels; strings with escapes are decoded and
//! escaped again as `serde_json` escapes; exponents get its `e` and explicit sign. Anything
//! else (unknown or repeated top-level keys, escaped top-level keys, another type, tombstones,
//! raw payloads, bad syntax, lone surrogates, the record that fixes the schema) goes the general
//! way, so every error has one implementation. The tests here and the `json_rows` fuzz target
//! render every record both ways and compare the bytes.

use std::collections::HashMap;

use crate::checkpoint::Incarnation;
use crate::json;
use crate::rows::{ColumnType, EventTimestamp, HeaderRef, RecordRef, Row, TimestampType};

/// The rendered rows of one epoch: JSON lines (each ending in `\n`) and each row's coordinates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowLines {
    bytes: Vec<u8>,
    coordinates: Vec<(i32, i64)>,
}

impl RowLines {
    pub fn new() -> Self {
        RowLines::default()
    }

    /// Appends `row` the general way (serialised with serde).
    pub fn push(&mut self, row: &Row) {
        serde_json::to_writer(&mut self.bytes, row).unwrap_or_else(|_| unreachable!("a Row always serialises"));
        self.bytes.push(b'\n');
        self.coordinates.push((row.partition, row.offset));
    }

    /// Inserts `bytes` at byte `at` of the lines (in the last line: a decoded key, see
    /// `crate::keys::splice`).
    pub(crate) fn insert(&mut self, at: usize, bytes: &[u8]) {
        let at = at.min(self.bytes.len());
        self.bytes.splice(at..at, bytes.iter().copied());
    }

    /// Takes back the last line, which starts at byte `line_start` (a row that must not be
    /// kept after all).
    pub(crate) fn drop_last(&mut self, line_start: usize) {
        if line_start < self.bytes.len() {
            self.bytes.truncate(line_start);
            self.coordinates.pop();
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.coordinates.len()
    }

    pub fn is_empty(&self) -> bool {
        self.coordinates.is_empty()
    }

    /// The JSON lines, each with its trailing newline: the contents of a segment file.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// `(partition, offset)` of every row, in order.
    pub fn coordinates(&self) -> &[(i32, i64)] {
        &self.coordinates
    }

    /// Empties the lines for the next epoch, keeping at most [`RowLines::KEPT_CAPACITY`] bytes
    /// of the allocation: every partition has one, so keeping whole epochs' worth would
    /// multiply by the number of partitions.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.bytes.shrink_to(Self::KEPT_CAPACITY);
        self.coordinates.clear();
        self.coordinates.shrink_to(Self::KEPT_CAPACITY / 256);
    }

    /// See [`RowLines::clear`].
    pub const KEPT_CAPACITY: usize = 256 * 1024;

    /// Empties the lines and keeps the whole allocation, for a buffer that goes back to a pool
    /// of spares (see `read.rs`): a fresh buffer grown to an epoch's size costs a page fault per
    /// 4 KiB where the allocator gives large blocks back to the system (musl's does).
    pub fn reset(&mut self) {
        self.bytes.clear();
        self.coordinates.clear();
    }

    /// Bytes the buffer holds allocated.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity() + self.coordinates.capacity() * std::mem::size_of::<(i32, i64)>()
    }
}

impl<'a> FromIterator<&'a Row> for RowLines {
    fn from_iter<I: IntoIterator<Item = &'a Row>>(rows: I) -> Self {
        let mut lines = RowLines::new();
        for row in rows {
            lines.push(row);
        }
        lines
    }
}

/// Which way a line was made; the tests use it to prove the shortcut is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinePath {
    /// [`LineTemplate::render_flat`]: the payload's bytes checked and copied.
    Flat,
    /// [`LineTemplate::render_raw`]: the payload's bytes encoded without parsing.
    Raw,
    /// Through a `Row` (the first record, anything the shortcut does not take, tombstones, raw).
    General,
}

/// The fixed parts of a resource's lines, built once its schema is fixed, and the scratch space
/// of [`LineTemplate::render_flat`].
#[derive(Debug)]
pub struct LineTemplate {
    /// A raw resource: its one column is `payload`, see [`LineTemplate::render_raw`].
    raw: bool,
    /// `{"topic":"<topic>","partition":`
    head: Vec<u8>,
    /// `,"_sluice_event_id":"<origin hash>:<topic id>:` (the partition and offset follow).
    event_id_head: Vec<u8>,
    columns: Vec<ColumnTemplate>,
    index: HashMap<String, usize>,
    /// Per column: where its value is, valid when `seen` equals `stamp`: a range of the current
    /// payload, or of `rewritten` (true) for a value rewritten into `serde_json`'s form.
    spans: Vec<(usize, usize, bool)>,
    seen: Vec<u32>,
    stamp: u32,
    /// Values of the current payload rewritten into `serde_json`'s form (see the module docs).
    rewritten: Vec<u8>,
    /// Scratch of [`Canonical`]: the keys of the objects being rewritten, as ranges of
    /// `rewritten`, and the open containers (object or array, where its keys start).
    keys: Vec<(usize, usize)>,
    open: Vec<(bool, usize)>,
}

/// Nesting deeper than this goes the general way (`serde_json` refuses more than 128 levels;
/// the general way then reports it).
pub const MAX_NESTING: usize = 100;

#[derive(Debug)]
struct ColumnTemplate {
    name: String,
    column_type: ColumnType,
    /// `,"<name>":`
    key: Vec<u8>,
}

impl LineTemplate {
    /// For a raw resource (its one column is the payload's bytes).
    pub fn raw(topic: &str, incarnation: &Incarnation) -> Self {
        LineTemplate { raw: true, ..LineTemplate::new(topic, incarnation, []) }
    }

    /// The position of column `name` in the schema (object resources).
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Whether this template is for a raw resource ([`LineTemplate::render_raw`]) or an object
    /// one ([`LineTemplate::render_flat`]).
    pub fn is_raw(&self) -> bool {
        self.raw
    }

    /// For a resource whose schema has `columns` (name and type, in schema order).
    pub fn new<'a>(
        topic: &str,
        incarnation: &Incarnation,
        columns: impl IntoIterator<Item = (&'a str, ColumnType)>,
    ) -> Self {
        let mut head = b"{\"topic\":".to_vec();
        write_str(&mut head, topic);
        head.extend_from_slice(b",\"partition\":");
        let mut event_id_head = b",\"_sluice_event_id\":".to_vec();
        write_str(&mut event_id_head, &incarnation.event_id_prefix());
        event_id_head.pop(); // the closing quote: partition and offset follow
        let columns: Vec<ColumnTemplate> = columns
            .into_iter()
            .map(|(name, column_type)| {
                let mut key = b",".to_vec();
                write_str(&mut key, name);
                key.push(b':');
                ColumnTemplate { name: name.to_string(), column_type, key }
            })
            .collect();
        let index = columns.iter().enumerate().map(|(i, column)| (column.name.clone(), i)).collect();
        let width = columns.len();
        LineTemplate {
            raw: false,
            head,
            event_id_head,
            columns,
            index,
            spans: vec![(0, 0, false); width],
            seen: vec![0; width],
            stamp: 0,
            rewritten: Vec::new(),
            keys: Vec::new(),
            open: Vec::new(),
        }
    }

    /// Appends the line of `record` (whose value is `payload`) to `lines` if the payload is a
    /// flat object the shortcut may take (see the module docs); returns false, with `lines`
    /// untouched, for anything else.
    pub fn render_flat(&mut self, record: &RecordRef<'_>, payload: &[u8], lines: &mut RowLines) -> bool {
        if !self.scan(payload) {
            return false;
        }
        let out = &mut lines.bytes;
        self.write_transport_and_metadata(out, record);
        for ((column, &seen), &(start, end, rewritten)) in self.columns.iter().zip(&self.seen).zip(&self.spans) {
            out.extend_from_slice(&column.key);
            let source = if rewritten { self.rewritten.as_slice() } else { payload };
            match source.get(start..end).filter(|_| seen == self.stamp) {
                Some(value) => out.extend_from_slice(value),
                None => out.extend_from_slice(b"null"),
            }
        }
        out.extend_from_slice(b"}\n");
        lines.coordinates.push((record.partition, record.offset));
        true
    }

    /// Appends the line of `record` (value `payload`) in a raw resource to `lines`, unless the
    /// payload might be a JSON object (its first non-whitespace byte is `{`): an object in a
    /// raw resource is an error the general way reports. Anything else is kept as bytes there,
    /// whatever it parses as, so no parsing is needed here.
    pub fn render_raw(&mut self, record: &RecordRef<'_>, payload: &[u8], lines: &mut RowLines) -> bool {
        if payload.get(skip_whitespace(payload, 0)) == Some(&b'{') {
            return false;
        }
        let out = &mut lines.bytes;
        self.write_transport_and_metadata(out, record);
        out.extend_from_slice(b",\"payload\":");
        write_bytes(out, payload);
        out.extend_from_slice(b"}\n");
        lines.coordinates.push((record.partition, record.offset));
        true
    }

    /// Appends the line of `record` whose payload columns' JSON texts are `values[span]`, one
    /// span per column in schema order (a registry format's row, written by its decoder in
    /// `serde_json`'s form, as [`Row`] would write the same values).
    pub fn render_values(&self, record: &RecordRef<'_>, values: &[u8], spans: &[(usize, usize)], lines: &mut RowLines) {
        let out = &mut lines.bytes;
        self.write_transport_and_metadata(out, record);
        for (column, &(start, end)) in self.columns.iter().zip(spans) {
            out.extend_from_slice(&column.key);
            out.extend_from_slice(values.get(start..end).unwrap_or(b"null"));
        }
        out.extend_from_slice(b"}\n");
        lines.coordinates.push((record.partition, record.offset));
    }

    /// Everything of a line up to the payload columns: `{"topic":..` to `"_sluice_key":..`.
    fn write_transport_and_metadata(&self, out: &mut Vec<u8>, record: &RecordRef<'_>) {
        let mut numbers = itoa::Buffer::new();
        out.extend_from_slice(&self.head);
        out.extend_from_slice(numbers.format(record.partition).as_bytes());
        out.extend_from_slice(b",\"offset\":");
        out.extend_from_slice(numbers.format(record.offset).as_bytes());
        out.extend_from_slice(b",\"tombstone\":false");
        out.extend_from_slice(&self.event_id_head);
        out.extend_from_slice(numbers.format(record.partition).as_bytes());
        out.push(b':');
        out.extend_from_slice(numbers.format(record.offset).as_bytes());
        out.extend_from_slice(b"\",\"_sluice_event_ts\":");
        write_timestamp(out, record.timestamp);
        out.extend_from_slice(b",\"_sluice_headers\":");
        write_headers(out, record.headers);
        out.extend_from_slice(b",\"_sluice_key\":");
        write_optional_bytes(out, record.key);
    }

    /// Checks `payload` and records each value's span; false for anything the shortcut does
    /// not take.
    fn scan(&mut self, payload: &[u8]) -> bool {
        // Valid UTF-8 as a whole means every string in it is (its quotes are ASCII); invalid
        // UTF-8 anywhere is an error the general way reports.
        let Ok(text) = std::str::from_utf8(payload) else { return false };
        let bytes = text.as_bytes();
        self.rewritten.clear();
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // After 2^32 rows: no stale entry may equal the new stamp.
            self.seen.fill(0);
            self.stamp = 1;
        }
        let mut i = skip_whitespace(bytes, 0);
        if bytes.get(i) != Some(&b'{') {
            return false;
        }
        i = skip_whitespace(bytes, i + 1);
        if bytes.get(i) == Some(&b'}') {
            return skip_whitespace(bytes, i + 1) == bytes.len();
        }
        let mut member = 0;
        loop {
            // Key.
            let Some(key_end) = plain_string_end(bytes, i) else { return false };
            let key = &text[i + 1..key_end - 1];
            let column = match self.columns.get(member) {
                // Producers usually write the fields in one order: try the same position first.
                Some(candidate) if candidate.name == key => member,
                _ => match self.index.get(key) {
                    Some(&column) => column,
                    None => return false,
                },
            };
            // A repeated key (or a column index out of step) leaves the shortcut.
            if self.seen.get(column).is_none_or(|&seen| seen == self.stamp) {
                return false;
            }
            i = skip_whitespace(bytes, key_end);
            if bytes.get(i) != Some(&b':') {
                return false;
            }
            // Value: its span in the payload, or (for text to rewrite) in `rewritten`.
            let start = skip_whitespace(bytes, i + 1);
            let mut span = None;
            let (end, found) = match bytes.get(start) {
                Some(b'"') => match plain_string_end(bytes, start) {
                    Some(end) => (end, Some(ColumnType::String)),
                    None => {
                        let from = self.rewritten.len();
                        let Some(end) = canonical_string(bytes, start, &mut self.rewritten) else { return false };
                        span = Some((from, self.rewritten.len()));
                        (end, Some(ColumnType::String))
                    }
                },
                Some(b't') if rest(bytes, start).starts_with(b"true") => (start + 4, Some(ColumnType::Bool)),
                Some(b'f') if rest(bytes, start).starts_with(b"false") => (start + 5, Some(ColumnType::Bool)),
                Some(b'n') if rest(bytes, start).starts_with(b"null") => (start + 4, None),
                Some(b'-' | b'0'..=b'9') => match plain_number_end(bytes, start) {
                    Some(end) => (end, Some(ColumnType::Number)),
                    None => {
                        let from = self.rewritten.len();
                        let Some(end) = canonical_number(bytes, start, &mut self.rewritten) else { return false };
                        span = Some((from, self.rewritten.len()));
                        (end, Some(ColumnType::Number))
                    }
                },
                Some(b'{' | b'[') => {
                    let from = self.rewritten.len();
                    let mut canonical =
                        Canonical { out: &mut self.rewritten, keys: &mut self.keys, open: &mut self.open };
                    let Some(end) = canonical.container(bytes, start) else { return false };
                    span = Some((from, self.rewritten.len()));
                    (end, Some(ColumnType::Json))
                }
                _ => return false,
            };
            let Some(column_type) = self.columns.get(column).map(|column| column.column_type) else { return false };
            if let Some(found) = found {
                if column_type != ColumnType::Json && column_type != found {
                    return false;
                }
            }
            match (self.seen.get_mut(column), self.spans.get_mut(column)) {
                (Some(seen), Some(slot)) => {
                    *seen = self.stamp;
                    *slot = match span {
                        Some((from, to)) => (from, to, true),
                        None => (start, end, false),
                    };
                }
                _ => return false,
            }
            member += 1;
            // A delimiter must follow: this also rejects `truex` and `12a`.
            i = skip_whitespace(bytes, end);
            match bytes.get(i) {
                Some(b',') => i = skip_whitespace(bytes, i + 1),
                Some(b'}') => return skip_whitespace(bytes, i + 1) == bytes.len(),
                _ => return false,
            }
        }
    }
}

/// The bytes from `start` on (none past the end).
fn rest(bytes: &[u8], start: usize) -> &[u8] {
    bytes.get(start..).unwrap_or_default()
}

/// JSON whitespace, exactly the four characters `serde_json` skips.
fn skip_whitespace(bytes: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(i) {
        i += 1;
    }
    i
}

/// For a string starting at `start` (a quote), the index after its closing quote, or `None`
/// for an escape, a raw control character or a missing quote.
fn plain_string_end(bytes: &[u8], start: usize) -> Option<usize> {
    if bytes.get(start) != Some(&b'"') {
        return None;
    }
    for (i, &byte) in bytes.iter().enumerate().skip(start + 1) {
        match byte {
            b'"' => return Some(i + 1),
            b'\\' | 0x00..=0x1f => return None,
            _ => {}
        }
    }
    None
}

/// A string starting at `start` (a quote) written to `out` as `serde_json` writes it: escapes
/// decoded (`\uXXXX` surrogate pairs joined), then `"`, `\\` and control characters escaped
/// (`\b \t \n \f \r`, else `\u00xx`), everything else as UTF-8. Returns the index after the
/// closing quote, or `None` for what `serde_json` refuses (a raw control character, an unknown
/// escape, bad hex, a lone surrogate, no closing quote). `bytes` is valid UTF-8.
fn canonical_string(bytes: &[u8], start: usize, out: &mut Vec<u8>) -> Option<usize> {
    if bytes.get(start) != Some(&b'"') {
        return None;
    }
    out.push(b'"');
    let mut i = start + 1;
    loop {
        let run = rest(bytes, i).iter().take_while(|&&b| b != b'"' && b != b'\\' && b >= 0x20).count();
        out.extend_from_slice(bytes.get(i..i + run)?);
        i += run;
        match *bytes.get(i)? {
            b'"' => {
                out.push(b'"');
                return Some(i + 1);
            }
            b'\\' => {
                let escape = *bytes.get(i + 1)?;
                i += 2;
                let decoded = match escape {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        let high = hex4(bytes, i)?;
                        i += 4;
                        match high {
                            0xD800..=0xDBFF => {
                                if rest(bytes, i).get(..2) != Some(b"\\u") {
                                    return None;
                                }
                                let low = hex4(bytes, i + 2)?;
                                if !(0xDC00..=0xDFFF).contains(&low) {
                                    return None;
                                }
                                i += 6;
                                char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))?
                            }
                            0xDC00..=0xDFFF => return None,
                            _ => char::from_u32(high)?,
                        }
                    }
                    _ => return None,
                };
                write_char(out, decoded);
            }
            // A raw control character: not JSON.
            _ => return None,
        }
    }
}

/// Four hex digits at `at`.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let text = std::str::from_utf8(digits).ok()?;
    if !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(text, 16).ok()
}

/// One character of a string's contents, escaped as `serde_json` escapes it.
fn write_char(out: &mut Vec<u8>, c: char) {
    match c {
        '"' => out.extend_from_slice(b"\\\""),
        '\\' => out.extend_from_slice(b"\\\\"),
        '\u{8}' => out.extend_from_slice(b"\\b"),
        '\u{c}' => out.extend_from_slice(b"\\f"),
        '\n' => out.extend_from_slice(b"\\n"),
        '\r' => out.extend_from_slice(b"\\r"),
        '\t' => out.extend_from_slice(b"\\t"),
        c if (c as u32) < 0x20 => {
            use std::io::Write;
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let mut buffer = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
        }
    }
}

/// A number starting at `start` written to `out` as `serde_json` (`arbitrary_precision`)
/// writes it: as it stands, except an exponent, which becomes `e` with an explicit sign.
/// Returns the index after it, or `None` when it is no JSON number.
fn canonical_number(bytes: &[u8], start: usize, out: &mut Vec<u8>) -> Option<usize> {
    let end = mantissa_end(bytes, start)?;
    out.extend_from_slice(bytes.get(start..end)?);
    if !matches!(bytes.get(end), Some(b'e' | b'E')) {
        return Some(end);
    }
    out.push(b'e');
    let mut i = end + 1;
    match bytes.get(i) {
        Some(&sign @ (b'+' | b'-')) => {
            out.push(sign);
            i += 1;
        }
        _ => out.push(b'+'),
    }
    let digits = rest(bytes, i).iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    out.extend_from_slice(bytes.get(i..i + digits)?);
    Some(i + digits)
}

/// Rewrites a nested object or array into `serde_json`'s minified form, checking it on the way:
/// an explicit stack (no recursion), keys compared once each object closes.
struct Canonical<'a> {
    out: &'a mut Vec<u8>,
    keys: &'a mut Vec<(usize, usize)>,
    open: &'a mut Vec<(bool, usize)>,
}

impl Canonical<'_> {
    /// The object or array starting at `start`, written to `out`; the index after it, or `None`
    /// for anything the general way must see (bad syntax, a duplicate key, too deep).
    fn container(&mut self, bytes: &[u8], start: usize) -> Option<usize> {
        self.keys.clear();
        self.open.clear();
        let mut i = start;
        // Each turn parses one value at `i`, then closes what it completes.
        loop {
            i = skip_whitespace(bytes, i);
            let mut closed = match *bytes.get(i)? {
                open @ (b'{' | b'[') => {
                    if self.open.len() >= MAX_NESTING {
                        return None;
                    }
                    let object = open == b'{';
                    self.out.push(open);
                    self.open.push((object, self.keys.len()));
                    i = skip_whitespace(bytes, i + 1);
                    let close = if object { b'}' } else { b']' };
                    if bytes.get(i) == Some(&close) {
                        self.close()?;
                        i += 1;
                        true
                    } else {
                        if object {
                            i = self.key(bytes, i)?;
                        }
                        continue;
                    }
                }
                b'"' => {
                    i = canonical_string(bytes, i, self.out)?;
                    true
                }
                b't' if rest(bytes, i).starts_with(b"true") => {
                    self.out.extend_from_slice(b"true");
                    i += 4;
                    true
                }
                b'f' if rest(bytes, i).starts_with(b"false") => {
                    self.out.extend_from_slice(b"false");
                    i += 5;
                    true
                }
                b'n' if rest(bytes, i).starts_with(b"null") => {
                    self.out.extend_from_slice(b"null");
                    i += 4;
                    true
                }
                b'-' | b'0'..=b'9' => {
                    i = canonical_number(bytes, i, self.out)?;
                    true
                }
                _ => return None,
            };
            // After a value: a comma goes on in the same container, a bracket closes it.
            while closed {
                let &(object, _) = self.open.last()?;
                i = skip_whitespace(bytes, i);
                match (bytes.get(i), object) {
                    (Some(b','), _) => {
                        self.out.push(b',');
                        i = skip_whitespace(bytes, i + 1);
                        if object {
                            i = self.key(bytes, i)?;
                        }
                        closed = false;
                    }
                    (Some(b'}'), true) | (Some(b']'), false) => {
                        self.close()?;
                        i += 1;
                        if self.open.is_empty() {
                            return Some(i);
                        }
                    }
                    _ => return None,
                }
            }
        }
    }

    /// An object's key at `i` and its colon; the index after the colon.
    fn key(&mut self, bytes: &[u8], i: usize) -> Option<usize> {
        let from = self.out.len();
        let end = canonical_string(bytes, i, self.out)?;
        self.keys.push((from, self.out.len()));
        let colon = skip_whitespace(bytes, end);
        if bytes.get(colon) != Some(&b':') {
            return None;
        }
        self.out.push(b':');
        Some(colon + 1)
    }

    /// Closes the innermost container; `None` when an object has a key twice (keys are
    /// compared in their rewritten form, which is one text per decoded string).
    fn close(&mut self) -> Option<()> {
        let (object, first_key) = self.open.pop()?;
        self.out.push(if object { b'}' } else { b']' });
        if object {
            let out = &*self.out;
            let keys = self.keys.get_mut(first_key..)?;
            let text = |&(from, to): &(usize, usize)| out.get(from..to).unwrap_or_default();
            if keys.len() <= 8 {
                for (n, key) in keys.iter().enumerate() {
                    if keys.iter().skip(n + 1).any(|other| text(other) == text(key)) {
                        return None;
                    }
                }
            } else {
                keys.sort_unstable_by(|a, b| text(a).cmp(text(b)));
                if keys.windows(2).any(|pair| matches!(pair, [a, b] if text(a) == text(b))) {
                    return None;
                }
            }
            self.keys.truncate(first_key);
        }
        Some(())
    }
}

/// For a number starting at `start`: `-?(0|[1-9][0-9]*)(\.[0-9]+)?` without an exponent; the
/// index after it, or `None`.
fn plain_number_end(bytes: &[u8], start: usize) -> Option<usize> {
    match mantissa_end(bytes, start)? {
        end if matches!(bytes.get(end), Some(b'e' | b'E')) => None,
        end => Some(end),
    }
}

/// For a number starting at `start`: the index after `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, or `None`.
fn mantissa_end(bytes: &[u8], start: usize) -> Option<usize> {
    let digits = |from: usize| from + rest(bytes, from).iter().take_while(|b| b.is_ascii_digit()).count();
    let mut i = start;
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    match bytes.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(i),
        _ => return None,
    }
    if bytes.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    Some(i)
}

/// A JSON string, escaped exactly as `serde_json` escapes it.
pub(crate) fn write_str(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(out, text).unwrap_or_else(|_| unreachable!("a str always serialises"));
}

/// `{"utf8": ...}` or `{"base64": ...}`, as [`json::bytes_to_json`].
pub(crate) fn write_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            out.extend_from_slice(b"{\"utf8\":");
            write_str(out, text);
        }
        Err(_) => {
            out.extend_from_slice(b"{\"base64\":\"");
            out.extend_from_slice(json::base64(bytes).as_bytes());
            out.push(b'"');
        }
    }
    out.push(b'}');
}

pub(crate) fn write_optional_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(bytes) => write_bytes(out, bytes),
        None => out.extend_from_slice(b"null"),
    }
}

fn write_headers(out: &mut Vec<u8>, headers: &[HeaderRef<'_>]) {
    out.push(b'[');
    for (i, header) in headers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        write_bytes(out, header.key);
        out.push(b',');
        write_optional_bytes(out, header.value);
        out.push(b']');
    }
    out.push(b']');
}

fn write_timestamp(out: &mut Vec<u8>, timestamp: Option<EventTimestamp>) {
    let Some(timestamp) = timestamp else {
        out.extend_from_slice(b"null");
        return;
    };
    out.extend_from_slice(b"{\"millis\":");
    out.extend_from_slice(itoa::Buffer::new().format(timestamp.millis).as_bytes());
    out.extend_from_slice(match timestamp.kind {
        TimestampType::CreateTime => &b",\"type\":\"create_time\"}"[..],
        TimestampType::LogAppendTime => &b",\"type\":\"log_append_time\"}"[..],
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::RowDecoder;
    use sluice_tests::XorShift;

    fn decoder() -> RowDecoder {
        RowDecoder::new(
            "or\"ders",
            Incarnation { connection_id: "c".into(), cluster_id: "k".into(), topic_id: "tid".into() },
        )
    }

    fn record<'a>(offset: i64, value: &'a [u8], headers: &'a [HeaderRef<'a>]) -> RecordRef<'a> {
        RecordRef {
            partition: 3,
            offset,
            key: (offset % 3 == 0).then_some(b"k\xff".as_slice()),
            value: Some(value),
            headers,
            timestamp: (offset % 2 == 0)
                .then_some(EventTimestamp { millis: 1_700_000_000_000 + offset, kind: TimestampType::LogAppendTime }),
        }
    }

    /// Renders `record` both ways with decoders that have seen the same records, checks the
    /// outcomes are equal, and returns the way `decode_into` took.
    fn both_ways(general: &mut RowDecoder, fast: &mut RowDecoder, record: &RecordRef<'_>) -> Option<LinePath> {
        let mut expected = RowLines::new();
        let expected_outcome = general.decode(record).map(|row| expected.push(&row));
        let mut got_lines = RowLines::new();
        let got_outcome = fast.decode_into(record, &mut got_lines);
        match (expected_outcome, got_outcome) {
            (Ok(()), Ok(path)) => {
                assert_eq!(
                    String::from_utf8_lossy(got_lines.bytes()),
                    String::from_utf8_lossy(expected.bytes()),
                    "payload {:?}",
                    String::from_utf8_lossy(record.value.unwrap_or_default())
                );
                assert_eq!(got_lines.coordinates(), expected.coordinates());
                Some(path)
            }
            (Err(expected), Err(got)) => {
                assert_eq!(got, expected);
                assert!(got_lines.is_empty(), "a rejected record left a line");
                None
            }
            (expected, got) => panic!(
                "payload {:?}: general way {expected:?}, decode_into {got:?}",
                String::from_utf8_lossy(record.value.unwrap_or_default())
            ),
        }
    }

    const FIRST: &[u8] = br#"{"id":1,"name":"a","paid":true,"amount":1.50,"extra":null,"tags":["x"]}"#;

    #[test]
    fn flat_objects_take_the_shortcut_and_match_the_general_way() {
        let (mut general, mut fast) = (decoder(), decoder());
        let headers = [HeaderRef { key: b"h", value: Some(b"\x00\xff") }, HeaderRef { key: b"e\n", value: None }];
        assert_eq!(both_ways(&mut general, &mut fast, &record(0, FIRST, &[])), Some(LinePath::General));
        let flat: [&[u8]; 10] = [
            br#"{"id":2,"name":"b","paid":false,"amount":-0.25,"extra":"s","tags":"t"}"#,
            br#" { "name" : "reordered" , "id" : -0 , "paid" : null } "#,
            br#"{}"#,
            b"{\"id\":123456789012345678901234567890,\r\n\t\"amount\":0}",
            "{\"name\":\"café ✓ / \u{2028}\",\"tags\":null}".as_bytes(),
            b"{\"extra\":12.0,\"tags\":true,\"name\":\"/ and \x7f text\"}",
            br#"{"id":10}"#,
            br#"{"name":""}"#,
            br#"{"amount":100.10}"#,
            br#"{"tags":-12.5,"extra":false}"#,
        ];
        for (i, payload) in flat.iter().enumerate() {
            let record = record(i as i64 + 1, payload, &headers);
            assert_eq!(both_ways(&mut general, &mut fast, &record), Some(LinePath::Flat), "{i}");
        }
    }

    /// Nested values, escapes and exponents are rewritten into serde_json's form on the way.
    #[test]
    fn nested_values_escapes_and_exponents_are_rewritten_as_the_general_way_writes_them() {
        let (mut general, mut fast) = (decoder(), decoder());
        both_ways(&mut general, &mut fast, &record(0, FIRST, &[]));
        let rewritten: [&[u8]; 18] = [
            br#"{"tags":{"nested":1}}"#,
            br#"{"tags":[1,2]}"#,
            br#"{"tags" : [ 1 , { "a" : [ ] , "b" : { } , "c" : null } , "x" , true , false , -0.5 ]}"#,
            br#"{"tags":[[[[["deep"]]]]]}"#,
            br#"{"tags":{"a":{"a":{"a":1}},"b":[{"a":1},{"a":2}]}}"#,
            br#"{"tags":{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10}}"#,
            br#"{"tags":{"\u0061":1,"b":2}}"#,
            br#"{"tags":["\u00e9\u2028\ud83d\ude00 \/ \" \\ \b\f\n\r\t \u0001 \u001F \u007f"]}"#,
            br#"{"name":"esc\"aped"}"#,
            br#"{"name":"a\u0062"}"#,
            br#"{"name":"\u00E9t\u00e9 \/"}"#,
            br#"{"amount":1e5}"#,
            br#"{"amount":1E+5}"#,
            br#"{"amount":2.5e-3}"#,
            br#"{"amount":-0E0}"#,
            br#"{"tags":[1e5,1E-5,0.5e+10]}"#,
            "{\"tags\":{\"caf\u{e9}\":\"\u{2028}\"}}".as_bytes(),
            br#"{"tags":"a string in a json column","extra":[1]}"#,
        ];
        for (i, payload) in rewritten.iter().enumerate() {
            let record = record(i as i64 + 1, payload, &[]);
            assert_eq!(both_ways(&mut general, &mut fast, &record), Some(LinePath::Flat), "{i}");
        }
        // Keys that differ only in how they are escaped are the same key.
        let same = br#"{"tags":{"a":1,"\u0061":2}}"#;
        assert_eq!(both_ways(&mut general, &mut fast, &record(40, same, &[])), None);
        let many: String = (0..20).map(|n| format!("\"k{n}\":{n},")).collect();
        let duplicated = format!("{{\"tags\":{{{many}\"k7\":0}}}}");
        assert_eq!(both_ways(&mut general, &mut fast, &record(41, duplicated.as_bytes(), &[])), None);
    }

    #[test]
    fn everything_else_goes_the_general_way_with_the_same_outcome() {
        let (mut general, mut fast) = (decoder(), decoder());
        both_ways(&mut general, &mut fast, &record(0, FIRST, &[]));
        let others: [&[u8]; 33] = [
            br#"{"tags":{"a":1,"a":2}}"#,
            br#"{"tags":[{"b":[{"c":1,"c":1}]}]}"#,
            br#"{"name":"\ud800"}"#,
            br#"{"name":"\udc00\ud800"}"#,
            br#"{"name":"\ud800\u0041"}"#,
            br#"{"name":"\x"}"#,
            br#"{"name":"\u12g4"}"#,
            br#"{"amount":1e}"#,
            br#"{"amount":1e+}"#,
            br#"{"tags":[1,]}"#,
            br#"{"tags":{"a"}}"#,
            br#"{"tags":{1:2}}"#,
            br#"{"tags":[1 2]}"#,
            br#"{"tags":{"a":1]}"#,
            br#"{"tags":["a\u0000\u001f\n"}"#,
            br#"{"id":[1]}"#,
            br#"{"id":1,"id":2}"#,
            br#"{"unknown":1}"#,
            br#"{"id":"a string"}"#,
            br#"{"paid":1}"#,
            br#"{"id":01}"#,
            br#"{"id":1.}"#,
            br#"{"id":-}"#,
            br#"{"id":1,}"#,
            br#"{"id":1} x"#,
            br#"{"id":tru}"#,
            br#"{"paid":truex}"#,
            br#"{"id" 1}"#,
            b"{\"name\":\"raw\ttab\"}",
            b"{\"name\":\"\xff\"}",
            br#"[1]"#,
            br#"{"n\u0061me":"escaped key"}"#,
            br#"{"id":1"#,
        ];
        // Too deep for the shortcut (the general way decides; serde_json refuses past 128).
        let deep = format!("{{\"tags\":{}1{}}}", "[".repeat(MAX_NESTING + 1), "]".repeat(MAX_NESTING + 1));
        assert_ne!(both_ways(&mut general, &mut fast, &record(80, deep.as_bytes(), &[])), Some(LinePath::Flat));
        let deeper = format!("{{\"tags\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        assert_eq!(both_ways(&mut general, &mut fast, &record(81, deeper.as_bytes(), &[])), None);
        for (i, payload) in others.iter().enumerate() {
            let record = record(i as i64 + 1, payload, &[]);
            assert_ne!(both_ways(&mut general, &mut fast, &record), Some(LinePath::Flat), "{i}");
        }
        let tombstone = RecordRef { value: None, ..record(99, b"", &[]) };
        assert_eq!(both_ways(&mut general, &mut fast, &tombstone), Some(LinePath::General));
    }

    /// Random flat and not-quite-flat objects: both ways agree on every one, and the shortcut
    /// takes a good share of them (so the comparison is not vacuous).
    #[test]
    fn random_payloads_render_identically() {
        let (mut general, mut fast) = (decoder(), decoder());
        both_ways(&mut general, &mut fast, &record(0, FIRST, &[]));
        let names = ["id", "name", "paid", "amount", "extra", "tags", "other", "n\\u0061me"];
        let values = [
            "0",
            "-1",
            "12.50",
            "1e3",
            "-0.0",
            "00",
            "\"s\"",
            "\"\"",
            "\"é\\n\"",
            "\"a\\\"b\"",
            "true",
            "false",
            "null",
            "[]",
            "{}",
            "{\"a\":1}",
            "\"\u{2028}\"",
            "1.",
            "tru",
            "[1, {\"a\": [true, null]}, \"x\"]",
            "{\"a\":1,\"a\":2}",
            "{\"a\":{\"b\":1},\"b\":{\"a\":[]}}",
            "\"\\u00e9\\/\"",
            "\"\\ud83d\\ude00\"",
            "\"\\ud83d\"",
            "1E-3",
            "-2e+0",
            "[[[]]]",
            " [ 1 , 2 ] ",
            "[1,]",
            "{\"\\u0061\":1,\"a\":2}",
        ];
        let spaces = ["", " ", "\n", "\t \r"];
        let mut random = XorShift(0x5eed_1234_abcd_9876);
        let mut flat = 0;
        let rounds = 4000;
        for offset in 1..=rounds {
            let mut text = String::from(spaces[random.below(4) as usize]);
            text.push('{');
            let fields = random.below(5);
            for field in 0..fields {
                if field > 0 {
                    text.push(',');
                }
                let bound = if random.below(8) == 0 { 8 } else { 6 };
                let name = names[random.below(bound) as usize];
                let value = values[random.below(values.len() as u64) as usize];
                let space = spaces[random.below(4) as usize];
                text.push_str(&format!("{space}\"{name}\"{space}:{space}{value}{space}"));
            }
            text.push('}');
            if random.below(50) == 0 {
                text.push_str(" ,");
            }
            let record = record(offset, text.as_bytes(), &[]);
            if both_ways(&mut general, &mut fast, &record) == Some(LinePath::Flat) {
                flat += 1;
            }
        }
        assert!(flat > rounds / 10, "only {flat} of {rounds} payloads took the shortcut");
    }

    /// A raw resource: payloads that cannot be objects are written as bytes without parsing;
    /// anything starting with `{` goes the general way (an object there is an error).
    #[test]
    fn raw_resources_take_the_raw_shortcut() {
        let (mut general, mut fast) = (decoder(), decoder());
        assert_eq!(both_ways(&mut general, &mut fast, &record(0, b"\xff\xfe", &[])), Some(LinePath::General));
        let raw: [&[u8]; 8] = [
            b"plain text",
            b"",
            b"\x00\x01 binary \xff",
            b"[1,2,{\"a\":1}]",
            b"\"a \\\" quoted\\n string\"",
            b"  42",
            "caf\u{e9} \u{2028} \t tab".as_bytes(),
            b"{ broken",
        ];
        for (i, payload) in raw.iter().enumerate() {
            // `{ broken` is no object: kept as bytes, but found out the general way.
            let expected = if payload.starts_with(b"{") { LinePath::General } else { LinePath::Raw };
            let expected = Some(expected);
            assert_eq!(both_ways(&mut general, &mut fast, &record(i as i64 + 1, payload, &[])), expected, "{i}");
        }
        // Objects, even behind whitespace, are the general way's to refuse.
        assert_eq!(both_ways(&mut general, &mut fast, &record(20, b" \n{\"a\":1}", &[])), None);
        let tombstone = RecordRef { value: None, ..record(21, b"", &[]) };
        assert_eq!(both_ways(&mut general, &mut fast, &tombstone), Some(LinePath::General));
    }

    #[test]
    fn number_and_string_scanners() {
        assert_eq!(plain_number_end(b"-0.5,", 0), Some(4));
        assert_eq!(plain_number_end(b"120}", 0), Some(3));
        assert_eq!(plain_number_end(b"0", 0), Some(1));
        assert_eq!(plain_number_end(b"-", 0), None);
        assert_eq!(plain_number_end(b"1.", 0), None);
        assert_eq!(plain_number_end(b"1.5e3", 0), None);
        assert_eq!(plain_number_end(b"01", 0), Some(1), "the caller rejects what follows");
        assert_eq!(plain_string_end(br#""ab"c"#, 0), Some(4));
        assert_eq!(plain_string_end(br#""a\"b""#, 0), None);
        assert_eq!(plain_string_end(b"\"a\x01\"", 0), None);
        assert_eq!(plain_string_end(br#""open"#, 0), None);
    }
}
