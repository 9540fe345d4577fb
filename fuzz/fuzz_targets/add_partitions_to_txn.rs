#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sluice_fuzz::fuzz_bounded("add_partitions_to_txn", data);
});
