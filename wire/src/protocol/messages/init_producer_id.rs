//! InitProducerId (key 22): a producer id and epoch for idempotent or transactional producing.
//!
//! Versions 0..=5, flexible from 2. v3 lets a producer pass its current id and epoch to bump the
//! epoch instead of getting a new id (KIP-360).
//!
//! # References
//! - `InitProducerIdRequest.json`, `InitProducerIdResponse.json`.
//! - KIP-98, KIP-360.

use super::{check_version, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    /// `None` for an idempotent (non-transactional) producer.
    pub transactional_id: Option<String>,
    pub transaction_timeout_ms: i32,
    /// -1, or the current id to bump its epoch (v3+).
    pub producer_id: i64,
    /// -1, or the current epoch (v3+).
    pub producer_epoch: i16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    pub throttle_time_ms: i32,
    pub error_code: ErrorCode,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 5;

impl Request for InitProducerIdRequest {
    const API_KEY: ApiKey = ApiKey::INIT_PRODUCER_ID;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = InitProducerIdResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.nullable_string(flexible, self.transactional_id.as_deref());
        writer.i32(self.transaction_timeout_ms);
        if version >= 3 {
            writer.i64(self.producer_id);
            writer.i16(self.producer_epoch);
        }
        write_no_tags(writer, flexible);
    }
}

impl Response for InitProducerIdResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "InitProducerId response version")?;
        let flexible = ApiKey::INIT_PRODUCER_ID.is_flexible(version);
        let response = InitProducerIdResponse {
            throttle_time_ms: reader.i32("throttle time")?,
            error_code: ErrorCode(reader.i16("error code")?),
            producer_id: reader.i64("producer id")?,
            producer_epoch: reader.i16("producer epoch")?,
        };
        skip_tags(reader, flexible)?;
        reader.finish("InitProducerId response")?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for InitProducerIdResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            w.i32(self.throttle_time_ms);
            w.i16(self.error_code.0);
            w.i64(self.producer_id);
            w.i16(self.producer_epoch);
            write_no_tags(w, ApiKey::INIT_PRODUCER_ID.is_flexible(version));
        }
    }

    fn response() -> impl Strategy<Value = InitProducerIdResponse> {
        (any::<i32>(), error_code(), any::<i64>(), any::<i16>()).prop_map(
            |(throttle_time_ms, error_code, producer_id, producer_epoch)| InitProducerIdResponse {
                throttle_time_ms,
                error_code,
                producer_id,
                producer_epoch,
            },
        )
    }

    proptest! {
        #[test]
        fn response_roundtrips(value in response()) {
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
                prop_assert_eq!(decode_response::<InitProducerIdResponse>(encode_response(&value, version), version).ok(), Some(value));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<InitProducerIdResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            producer_id: -1,
            producer_epoch: -1,
        };
        assert_eq!(request_bytes(&request, 1), [0xff, 0xff, 0, 0, 0xea, 0x60]);
        let mut v4 = vec![0, 0, 0, 0xea, 0x60];
        v4.extend([0xff; 10]);
        v4.push(0);
        assert_eq!(request_bytes(&request, 4), v4);
    }
}
