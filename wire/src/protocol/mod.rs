//! The sans-IO protocol core: bytes in, typed values out. No tokio, no clock, no sockets.
//!
//! - [`codec`]: bounded primitives ([`codec::Reader`] never reads past its frame).
//! - [`frame`]: size-prefixed framing.
//! - [`api`]: API keys, request and response headers.
//! - [`error_code`]: Kafka error codes as an open enum, each mapped to an action.
//! - [`messages`]: request encoders and bounded response decoders, one module per API.
//! - [`records`]: record batch v2 decoding and encoding, codecs, read_committed filtering.

pub mod api;
pub mod codec;
pub mod error_code;
pub mod frame;
pub mod messages;
pub mod records;
pub mod sasl;

pub use api::ApiKey;
pub use codec::{DecodeError, Reader, Writer};
pub use error_code::{ErrorAction, ErrorCode};
