use bytes::Bytes;
use sluice_wire::protocol::messages::fetch::FetchResponse;
use sluice_wire::protocol::messages::Response;
use sluice_wire::protocol::records::*;
use sluice_wire::protocol::Reader;
#[test]
fn explore() {
    let body = Bytes::from(std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/fetch_v18_txn.bin")).unwrap());
    let r = FetchResponse::decode(18, &mut Reader::new(body)).unwrap();
    for p in &r.responses[0].partitions {
        println!("p{} hw {} lso {} lso {} aborted {:?} len {}", p.partition_index, p.high_watermark, p.last_stable_offset, p.log_start_offset, p.aborted_transactions, p.records.as_ref().unwrap().len());
        for b in RecordBatches::new(p.records.clone().unwrap()) { let b = b.unwrap(); println!("  {} {} pid {} ctl {} tx {}", b.base_offset, b.last_offset(), b.producer_id, b.is_control(), b.is_transactional()); }
        let d = decode_partition(p.records.clone().unwrap(), 0, IsolationLevel::ReadCommitted, &p.aborted_transactions.clone().unwrap_or_default().iter().map(|a| AbortedTransaction{producer_id:a.producer_id, first_offset:a.first_offset}).collect::<Vec<_>>(), &mut Decompressor::new(), &DecodeLimits::default()).unwrap();
        println!("  {:?}", d.records.iter().map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap()).to_string()).collect::<Vec<_>>());
    }
}
