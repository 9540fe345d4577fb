#![forbid(unsafe_code)]
//! TLS, mTLS and SASL tests against real secured listeners arrive with the security issue.
