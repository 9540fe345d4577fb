//! Shared pieces of the bench binaries: the deterministic record values of the datasets and
//! the summary line every client prints.

/// The one summary line every benchmark client prints on stdout (run.py parses it):
/// `RESULT records=N bytes=B elapsed_s=S first_s=F`. `bytes` counts keys plus values; the clock
/// runs from just before the client is created (connecting, metadata and the offset lookup
/// included) to the Nth record; `first_s` is when the first record arrived on that clock.
pub fn summary_line(records: u64, bytes: u64, elapsed_s: f64, first_s: f64) -> String {
    format!("RESULT records={records} bytes={bytes} elapsed_s={elapsed_s:.6} first_s={first_s:.6}")
}

/// Record values, the same bytes every time for the same (kind, partition, index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// Exactly 100 bytes of word-like text (compresses about like log lines).
    Text100,
    /// Exactly 1024 bytes of word-like text.
    Text1k,
    /// A JSON object of about 200 bytes (about 160 to 240), one level, mixed field types.
    Json200,
    /// A JSON object shaped like application events (about 300 to 600 bytes; every 50th a
    /// wide one of about 3 KiB): nested objects and arrays, escapes (`\"`, `\n`, `\u00e9`),
    /// raw unicode, numbers with exponents; one in four written as Python's `json.dumps` writes
    /// (a space after `,` and `:`, non-ASCII as `\u` escapes). The same columns in every row.
    JsonNested,
}

impl ValueKind {
    pub fn parse(text: &str) -> Option<ValueKind> {
        match text {
            "text100" => Some(ValueKind::Text100),
            "text1k" => Some(ValueKind::Text1k),
            "json200" => Some(ValueKind::Json200),
            "json-nested" => Some(ValueKind::JsonNested),
            _ => None,
        }
    }

    /// Writes the value of record `index` of `partition` into `out` (cleared first).
    pub fn value(self, partition: i32, index: u64, out: &mut Vec<u8>) {
        out.clear();
        let mut rng = SplitMix64::new((partition as u64) << 40 ^ index);
        match self {
            ValueKind::Text100 => words(&mut rng, 100, out),
            ValueKind::Text1k => words(&mut rng, 1024, out),
            ValueKind::Json200 => {
                use std::io::Write;
                let id = (partition as u64) << 40 | index;
                let _ = write!(
                    out,
                    r#"{{"id":{id},"user":"user-{:05}","region":"eu-{}","amount":{}.{:02},"paid":{},"items":{},"note":""#,
                    rng.next() % 50_000,
                    rng.next() % 7,
                    rng.next() % 10_000,
                    rng.next() % 100,
                    rng.next() % 2 == 0,
                    rng.next() % 12,
                );
                let note_len = 60 + (rng.next() % 61) as usize;
                let mut note = Vec::with_capacity(note_len);
                words(&mut rng, note_len, &mut note);
                out.extend_from_slice(&note);
                out.extend_from_slice(b"\"}");
            }
            ValueKind::JsonNested => nested_event(&mut rng, (partition as u64) << 40 | index, out),
        }
    }
}

/// See [`ValueKind::JsonNested`].
fn nested_event(rng: &mut SplitMix64, id: u64, out: &mut Vec<u8>) {
    use std::io::Write;
    let python = rng.next() % 4 == 0;
    let (comma, colon) = if python { (", ", ": ") } else { (",", ":") };
    let city = [r"Z\u00fcrich", r"S\u00e3o Paulo", r"Krak\u00f3w", "Oslo"][rng.next() as usize % 4];
    let raw_city = ["Zürich", "São Paulo", "Kraków", "Oslo"][rng.next() as usize % 4];
    let _ = write!(
        out,
        "{{\"id\"{colon}{id}{comma}\"user\"{colon}{{\"name\"{colon}\"user-{:05}\"{comma}",
        rng.next() % 50_000
    );
    let _ = write!(out, "\"tags\"{colon}[\"vip\"{comma}\"beta-{}\"]{comma}", rng.next() % 9);
    let _ = write!(out, "\"address\"{colon}{{\"city\"{colon}\"{}\"{comma}", if python { city } else { raw_city });
    let _ = write!(out, "\"zip\"{colon}\"{:05}\"}}}}{comma}", rng.next() % 99_999);
    let _ = write!(out, "\"amount\"{colon}{}.{:02}e{}{comma}", rng.next() % 1000, rng.next() % 100, rng.next() % 4);
    let items = if id % 50 == 49 { 40 } else { 1 + rng.next() % 4 };
    out.extend_from_slice(format!("\"items\"{colon}[").as_bytes());
    for item in 0..items {
        if item > 0 {
            out.extend_from_slice(comma.as_bytes());
        }
        let _ = write!(
            out,
            "{{\"sku\"{colon}\"sku-{}\"{comma}\"qty\"{colon}{}{comma}\"price\"{colon}{}.{:02}{comma}\"attrs\"{colon}{{\"color\"{colon}\"blue\"{comma}\"size\"{colon}{}}}}}",
            rng.next() % 10_000,
            1 + rng.next() % 5,
            rng.next() % 200,
            rng.next() % 100,
            rng.next() % 50,
        );
    }
    out.extend_from_slice(b"]");
    let _ = write!(out, "{comma}\"ok\"{colon}{}{comma}\"note\"{colon}\"", rng.next() % 2 == 0);
    let mut note = Vec::new();
    let note_len = 40 + (rng.next() % 40) as usize;
    words(rng, note_len, &mut note);
    out.extend_from_slice(&note);
    out.extend_from_slice(if python { b"\\n\\\"quoted\\\" \\u2713\"}" } else { "\\n\\\"quoted\\\" ✓\"}".as_bytes() });
}

const WORDS: &[&str] = &[
    "order",
    "shipped",
    "the",
    "customer",
    "payment",
    "accepted",
    "warehouse",
    "eu-west",
    "retry",
    "status",
    "ok",
    "pending",
    "item",
    "sku",
    "42",
    "2023-11-14T22:13:20Z",
    "delivered",
    "cart",
    "session",
    "login",
    "user",
    "event",
    "click",
    "view",
    "error",
    "timeout",
    "latency",
    "ms",
    "region",
    "invoice",
    "refund",
    "queue",
    "kafka",
    "partition",
    "offset",
    "batch",
];

/// Space-separated words (1 in 8 replaced by a random number) cut to exactly `len` bytes.
fn words(rng: &mut SplitMix64, len: usize, out: &mut Vec<u8>) {
    let start = out.len();
    while out.len() - start < len {
        let pick = rng.next();
        if pick % 8 == 0 {
            out.extend_from_slice((pick >> 8).to_string().as_bytes());
        } else {
            out.extend_from_slice(WORDS[(pick >> 8) as usize % WORDS.len()].as_bytes());
        }
        out.push(b' ');
    }
    out.truncate(start + len);
}

/// SplitMix64: a tiny, fixed PRNG, so datasets do not depend on a crate's version.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_have_their_sizes_and_are_stable() {
        let mut out = Vec::new();
        for index in 0..1000 {
            ValueKind::Text100.value(0, index, &mut out);
            assert_eq!(out.len(), 100);
            ValueKind::Text1k.value(3, index, &mut out);
            assert_eq!(out.len(), 1024);
            ValueKind::Json200.value(1, index, &mut out);
            assert!((150..=250).contains(&out.len()), "{}", out.len());
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        ValueKind::Json200.value(2, 7, &mut a);
        ValueKind::Json200.value(2, 7, &mut b);
        assert_eq!(a, b);
    }
}
