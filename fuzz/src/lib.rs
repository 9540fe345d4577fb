//! Glue shared by the fuzz targets. The entry points live in `targets.rs`, which
//! `wire/tests/fuzz_corpus_replay.rs` also includes, so that `cargo test` replays every committed
//! corpus through exactly the code the fuzzer runs, on stable Rust and without this crate.

include!("targets.rs");

use std::alloc::System;

/// Counts every allocation of the fuzz binaries, so that each input can be held to a budget.
#[global_allocator]
static ALLOCATOR: cap::Cap<System> = cap::Cap::new(System, usize::MAX);

/// Bytes a target may allocate per input byte. The decoders' output structs are larger than
/// their wire form (a 4-byte partition entry becomes a struct of a few dozen bytes), so the
/// bound is linear in the input with a generous factor; what it rules out is allocation that
/// grows faster than the input, or from a count the input does not back.
const BYTES_PER_INPUT_BYTE: usize = 256;
/// Fixed allowance: buffers, hash maps, and the 1 MiB decompression limit of the record targets
/// (`fuzz_limits`) plus its reused output buffer.
const FIXED_ALLOWANCE: usize = 8 << 20;

/// Runs one target with an allocation budget derived from the input's length. Going over it
/// makes the allocation fail, which aborts the process: libFuzzer reports that input as a crash.
pub fn fuzz_bounded(name: &str, data: &[u8]) {
    let budget = data.len().saturating_mul(BYTES_PER_INPUT_BYTE).saturating_add(FIXED_ALLOWANCE);
    let _ = ALLOCATOR.set_limit(ALLOCATOR.allocated().saturating_add(budget));
    fuzz_one(name, data);
    let _ = ALLOCATOR.set_limit(usize::MAX);
}
