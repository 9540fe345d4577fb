//! Glue shared by the fuzz targets. The entry points live in `targets.rs` (wire targets), which
//! `wire/tests/fuzz_corpus_replay.rs` also includes, and `connector_targets.rs` (connector
//! targets), which `connector/tests/fuzz_corpus_replay.rs` includes, so that `cargo test` replays
//! every committed corpus through exactly the code the fuzzer runs, on stable Rust and without
//! this crate. `names.rs` lists the targets of each.

include!("names.rs");
include!("targets.rs");
include!("connector_targets.rs");

use std::alloc::System;

/// Counts every allocation of the fuzz binaries, so that each input can be held to a budget.
#[global_allocator]
static ALLOCATOR: cap::Cap<System> = cap::Cap::new(System, usize::MAX);

/// Bytes a target may allocate per input byte. The decoders' output structs are larger than
/// their wire form (a 4-byte partition entry becomes a struct of a few dozen bytes), so the
/// bound is linear in the input with a generous factor; what it rules out is allocation that
/// grows faster than the input, or from a count the input does not back.
const BYTES_PER_INPUT_BYTE: usize = 256;
/// Fixed allowance: buffers, hash maps, the 1 MiB decompression limit of the record targets
/// (`fuzz_limits`) with its reused output buffer (the zstd decoder grows it by doubling, so up to
/// twice the limit), and the batch `record_batch` rebuilds (at most the limit again, compressed
/// and decompressed); plus [`LZ4_BLOCKS`] and [`ZSTD_REFERENCE`].
const FIXED_ALLOWANCE: usize = (8 << 20) + LZ4_BLOCKS + ZSTD_REFERENCE;
/// The lz4 frame decoder's two block buffers, sized by the block size a frame declares (at most
/// 4 MiB): 8 MiB whatever the decompression limit. Found by `record_batch` once the zstd window
/// allowance, which used to cover it too, was gone (`fuzz/corpus/record_batch/lz4-4mib-blocks`).
const LZ4_BLOCKS: usize = 8 << 20;
/// The `zstd` target's reference decoder (ruzstd): its 1 MiB output buffer, and its ring buffer
/// holding the window (at most 1 MiB, `set_max_window_size`) plus the up to 1 MiB it decodes
/// ahead of each read, with block slack (about 2.25 MiB), which may be copied once as it grows.
/// The decoder under test keeps no window: it decodes into the output.
const ZSTD_REFERENCE: usize = (4 << 20) + (256 << 10);

/// Runs one target with an allocation budget derived from the input's length. Going over it
/// makes the allocation fail, which aborts the process: libFuzzer reports that input as a crash.
pub fn fuzz_bounded(name: &str, data: &[u8]) {
    let budget = data.len().saturating_mul(BYTES_PER_INPUT_BYTE).saturating_add(FIXED_ALLOWANCE);
    let _ = ALLOCATOR.set_limit(ALLOCATOR.allocated().saturating_add(budget));
    let known = fuzz_one(name, data) || fuzz_connector_one(name, data);
    assert!(known, "{name} is not a fuzz target (see names.rs)");
    let _ = ALLOCATOR.set_limit(usize::MAX);
}
