//! The data plane: blocks and shuffle segments over framed TCP.
//!
//! One request per connection. All integers little-endian.
//!
//! ```text
//! request  := header body mac [data]
//! header   := magic:"SLDP" version:u8 op:u8 body_len:u32
//! mac      := HMAC-SHA256(key, header ++ body)           32 bytes
//! str      := len:u16 bytes[len]                          UTF-8
//! body, by op (every body starts with ts:u64, Unix milliseconds, and
//! nonce:u128, random; `hdr` below):
//!   1 READ_BLOCK   hdr id:str                              key = secret
//!   2 WRITE_BLOCK  hdr id:str len:u64 crc:u32              key = secret
//!                  followed by `data`: len bytes, CRC32C(data) = crc
//!   3 FETCH        hdr job:u64 map:u32 attempt:u32 part:u32
//!                                                          key = job token
//!   4 STATS        hdr since:u64                            key = secret
//!   5 READ_HEAD    hdr id:str max:u64                       key = secret
//!   6 SINK         hdr len:u64                              key = secret
//!                  followed by len bytes, read and dropped (a probe)
//!   7 PROBE        hdr to:str len:u64                       key = secret
//!                  the server sends a SINK of len bytes (at most
//!                  MAX_PROBE) to the worker at `to` and times it
//!   8 READ_CHECKED hdr id:str                              key = secret
//!                  the block with its chunk checksums ahead of it, so
//!                  the reader can check each chunk before using it
//! response := status:u8 (0 ok, 1 error, 2 damaged replica)
//!   ok:    len:u64 records:u64 then len bytes (READ_BLOCK: the block;
//!          FETCH: partition `part`'s segment of the map's spill file, its
//!          blocks as stored, each with its own CRC32C; WRITE_BLOCK: none;
//!          STATS: `records` node samples taken since `since` (Unix ms),
//!          56 bytes each, as [`crate::sample`] documents; READ_HEAD: the
//!          block's first min(max, block length) bytes, for sampling;
//!          SINK: none, `records` = bytes received; PROBE: none,
//!          `records` = microseconds from its SINK's connect to its answer;
//!          READ_CHECKED: `records` = the chunk size C, then ceil(len / C)
//!          CRC32C values (u32 each) of the block's chunks as stored with
//!          it, then the len bytes of the block)
//!   error, damaged: msg_len:u32 msg[msg_len]
//! ```
//!
//! Status 2 answers READ_BLOCK, READ_CHECKED and READ_HEAD when the stored replica is
//! missing, has no valid checksum file, or has another length than its
//! checksum file says: the reader blames that copy and tries another.
//!
//! The server refuses a request with a wrong MAC, a timestamp more than
//! [`crate::auth::MAX_SKEW_MS`] off, a nonce it has seen (a replay), an unknown op or version, a body over
//! [`MAX_BODY`] or an invalid block id, before touching any file. A block
//! written is verified against its length and CRC, synced with its chunk
//! checksums ([`crate::block`]), and only then renamed into place, so a
//! reader never sees a partial block. A reader checks every block it
//! receives against the catalog's length and CRC; a mismatch is a
//! [`crate::ClusterError::Damaged`] against the sending replica. A fetched
//! segment is verified block by block as it arrives (length bounds before
//! allocating, CRC before writing), so a damaged map output is caught at
//! fetch time and reported as a fetch failure. In-flight bytes are bounded:
//! data moves through fixed buffers (the kernel's `sendfile` on the
//! sending side), never whole blocks in memory.
//!
//! The frame format (requests, answers) is `frame.rs`'s; the server side
//! ([`serve`]) `server.rs`'s; the client side `client.rs`'s, with the
//! chunk-checked block stream ([`open_checked_stream`]) in `checked.rs`
//! and shuffle fetches ([`fetch()`]) in `fetch.rs`.

mod checked;
mod client;
mod fetch;
mod frame;
mod server;
#[cfg(test)]
mod tests;

/// The data directory's layout, which the server serves from (its home is
/// [`crate::layout`]).
pub use crate::layout::{check_id, Layout};
pub use checked::{open_checked_stream, CheckedStream};
pub use client::{
    probe_link, read_block, read_block_capable, read_head, sink, stats, write_block,
    write_block_capable,
};
pub use fetch::{fetch, FetchWatch};
pub use frame::{Request, IO_TIMEOUT, MAGIC, MAX_BODY, MAX_PROBE};
pub use server::serve;
