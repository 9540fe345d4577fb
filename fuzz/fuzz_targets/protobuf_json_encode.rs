#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    sluice_fuzz::fuzz_bounded("protobuf_json_encode", data);
});
