//! Glue shared by the fuzz targets. The entry points live in `targets.rs`, which
//! `wire/tests/fuzz_corpus_replay.rs` also includes, so that `cargo test` replays every committed
//! corpus through exactly the code the fuzzer runs, on stable Rust and without this crate.

include!("targets.rs");
