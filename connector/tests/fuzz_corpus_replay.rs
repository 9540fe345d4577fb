//! Replays the committed fuzz corpora of the connector's targets (`CONNECTOR_TARGETS` in
//! `fuzz/src/names.rs`, e.g. `fuzz/corpus/json_rows/*`) through the same entry points the fuzz
//! targets call, on stable Rust: a crash the fuzzer found, once its input is committed, fails
//! `cargo test`. The entry points live in `fuzz/src/connector_targets.rs` and are included here,
//! so this test does not depend on the `sluice-fuzz` crate (which needs libFuzzer). The wire
//! targets are replayed by `wire/tests/fuzz_corpus_replay.rs`.

use std::path::Path;

#[allow(dead_code)]
mod targets {
    include!("../../fuzz/src/names.rs");
    include!("../../fuzz/src/connector_targets.rs");
}

#[test]
fn every_connector_corpus_replays() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let mut replayed = 0;
    for target in targets::CONNECTOR_TARGETS {
        let dir = corpus.join(target);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut files: Vec<_> = entries.map(|e| e.expect("corpus entry").path()).collect();
        files.sort();
        assert!(!files.is_empty(), "{target}: empty corpus");
        for path in files {
            let data = std::fs::read(&path).expect("read corpus file");
            let outcome = std::panic::catch_unwind(|| targets::fuzz_connector_one(target, &data));
            match outcome {
                Ok(known) => assert!(known, "{target}: not a connector target"),
                Err(_) => panic!(
                    "{target}: {} panics (reproduce: cargo test -p sluice --test fuzz_corpus_replay)",
                    path.display()
                ),
            }
            replayed += 1;
        }
    }
    eprintln!("replayed {replayed} corpus inputs");
}

#[test]
fn unknown_connector_target_is_refused() {
    assert!(!targets::fuzz_connector_one("no-such-target", b""));
    // The wire targets are not the connector's.
    assert!(!targets::fuzz_connector_one("frame", b""));
}
