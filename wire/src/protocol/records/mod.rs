//! Record batches (magic v2): decoding with CRC-32C checks and bounded decompression, encoding
//! for produce, and client-side read_committed filtering.
