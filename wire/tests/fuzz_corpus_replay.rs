//! Replays every committed fuzz corpus of the wire targets (`fuzz/corpus/<target>/*`) through
//! the same entry points the fuzz targets call, on stable Rust: a crash the fuzzer found, once
//! its input is committed, fails `cargo test`. The entry points live in `fuzz/src/targets.rs` and
//! are included here, so this test does not depend on the `sluice-fuzz` crate (which needs
//! libFuzzer). The connector's targets are replayed by `connector/tests/fuzz_corpus_replay.rs`.

use std::path::Path;

#[allow(dead_code)]
mod targets {
    include!("../../fuzz/src/names.rs");
    include!("../../fuzz/src/targets.rs");
}

#[test]
fn every_corpus_replays() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let mut replayed = 0;
    for target in targets::TARGETS {
        let dir = corpus.join(target);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut files: Vec<_> = entries.map(|e| e.expect("corpus entry").path()).collect();
        files.sort();
        assert!(!files.is_empty(), "{target}: empty corpus");
        for path in files {
            let data = std::fs::read(&path).expect("read corpus file");
            let outcome = std::panic::catch_unwind(|| targets::fuzz_one(target, &data));
            match outcome {
                Ok(known) => assert!(known, "{target}: not a target"),
                Err(_) => {
                    panic!("{target}: {} panics (reproduce: cargo test --test fuzz_corpus_replay)", path.display())
                }
            }
            replayed += 1;
        }
    }
    // Every corpus directory must belong to a target: a renamed target must not leave its corpus
    // silently unreplayed. The connector's corpora are checked by the connector's replay.
    for entry in std::fs::read_dir(&corpus).expect("fuzz/corpus") {
        let name = entry.expect("entry").file_name().into_string().expect("utf8 name");
        let known = targets::TARGETS.contains(&name.as_str()) || targets::CONNECTOR_TARGETS.contains(&name.as_str());
        assert!(known, "fuzz/corpus/{name} has no target");
    }
    eprintln!("replayed {replayed} corpus inputs");
}

/// The valid exchanges among the scram seeds must complete: otherwise the fuzzer starts from
/// nothing that reaches the server-final stage (a seed computed for other credentials or nonce).
#[test]
fn scram_seeds_reach_the_end_of_the_exchange() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/scram");
    for seed in ["valid-sha256", "valid-sha512", "valid-sha256-extensions"] {
        let data = std::fs::read(corpus.join(seed)).unwrap_or_else(|e| panic!("fuzz/corpus/scram/{seed}: {e}"));
        assert!(targets::scram(&data), "fuzz/corpus/scram/{seed} does not complete the exchange");
    }
    let tampered = std::fs::read(corpus.join("tampered-signature")).expect("fuzz/corpus/scram/tampered-signature");
    assert!(!targets::scram(&tampered), "a wrong server signature must not complete the exchange");
}

#[test]
fn unknown_target_is_refused() {
    assert!(!targets::fuzz_one("no-such-target", b""));
}
