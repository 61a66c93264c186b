//! Test helpers shared by agentcron's crates (dev-dependency only).
//!
//! - [`http`]: a small real HTTP/1.1 server on 127.0.0.1:0 that records
//!   requests and answers from a script.

#![forbid(unsafe_code)]
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

pub mod http;
