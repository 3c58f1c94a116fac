//! The calls of Hadoop's IPC that HDFS's "legacy" short-circuit reads
//! (HDFS-2246) need: the NameNode's `ClientProtocol.getListing` (with
//! `needLocation`: a directory's files and their blocks),
//! `getBlockLocations` (one file's blocks: ids, tokens and DataNodes) and
//! `reportBadBlocks` (a damaged replica), and a DataNode's
//! `ClientDatanodeProtocol.getBlockLocalPathInfo` (where its replica of a
//! block and the replica's checksums lie on this host's disk).
//!
//! Written by hand because no crate offers it: `hdfs-native` speaks the
//! NameNode's protocol and the DataNodes' transfer protocol but keeps its
//! RPC client and protobuf messages private, and it has no short-circuit
//! reads. Only what these calls need is here (messages keep the fields
//! read, and a block's required fields, which a report sends back;
//! protobuf skips the others), on a connection kept per server, user and
//! protocol, with simple authentication (a cluster with Kerberos refuses
//! it anyway: its DataNodes allow the call only over a Kerberos
//! connection).
//!
//! **The exchange** (Hadoop 3's `ipc.Server` and `ProtobufRpcEngine2`;
//! every number big-endian, "delimited" is a protobuf message after its
//! length as a varint):
//!
//! ```text
//! client: "hrpc" 0x09 0x00 0x00        magic, version 9, service class 0,
//!                                      auth NONE (simple, no SASL)
//! client: u32 len, delimited RpcRequestHeaderProto {callId -3},
//!         delimited IpcConnectionContextProto {user, protocol}
//!                                      (no answer)
//! client: u32 len, delimited RpcRequestHeaderProto {callId 0},
//!         delimited RequestHeaderProto {method, protocol, version 1},
//!         delimited request (e.g. GetBlockLocalPathInfoRequestProto)
//! server: u32 len, delimited RpcResponseHeaderProto {status, error},
//!         delimited response (on success)
//! ```
//!
//! The DataNode allows the call to the users in its
//! `dfs.block.local-path-access.user` only, and checks the block token
//! when block tokens are on.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use prost::Message;

/// The DataNode's protocol, as its Java interface is named.
const DATANODE: &str = "org.apache.hadoop.hdfs.protocol.ClientDatanodeProtocol";
/// The NameNode's protocol for clients.
const NAMENODE: &str = "org.apache.hadoop.hdfs.protocol.ClientProtocol";
/// Both protocols' `@ProtocolInfo` version (`ClientDatanodeProtocolPB`
/// and `ClientNamenodeProtocolPB`; the Java interfaces' `versionID`s are
/// not what the server compares).
const PROTOCOL_VERSION: u64 = 1;
/// `RpcKindProto.RPC_PROTOCOL_BUFFER`.
const RPC_PROTOCOL_BUFFER: i32 = 2;
/// The call id of the connection context.
const CONTEXT_CALL: i32 = -3;
/// How long a local DataNode may take to connect or answer.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read: Hadoop's own client's limit
/// (`ipc.maximum.response.length`); a page of a listing with its files'
/// blocks can pass a megabyte.
const MAX_ANSWER: u32 = 128 << 20;

#[derive(Clone, PartialEq, Message)]
struct RpcRequestHeader {
    #[prost(int32, optional, tag = "1")]
    rpc_kind: Option<i32>,
    /// `RPC_FINAL_PACKET` (0).
    #[prost(int32, optional, tag = "2")]
    rpc_op: Option<i32>,
    #[prost(sint32, required, tag = "3")]
    call_id: i32,
    #[prost(bytes = "vec", required, tag = "4")]
    client_id: Vec<u8>,
    #[prost(sint32, optional, tag = "5")]
    retry_count: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct UserInformation {
    #[prost(string, optional, tag = "1")]
    effective_user: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct IpcConnectionContext {
    #[prost(message, optional, tag = "2")]
    user_info: Option<UserInformation>,
    #[prost(string, optional, tag = "3")]
    protocol: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct RequestHeader {
    #[prost(string, required, tag = "1")]
    method_name: String,
    #[prost(string, required, tag = "2")]
    declaring_class_protocol_name: String,
    #[prost(uint64, required, tag = "3")]
    client_protocol_version: u64,
}

#[derive(Clone, PartialEq, Message)]
struct RpcResponseHeader {
    #[prost(uint32, required, tag = "1")]
    call_id: u32,
    /// SUCCESS 0, ERROR 1, FATAL 2.
    #[prost(int32, required, tag = "2")]
    status: i32,
    #[prost(string, optional, tag = "4")]
    exception_class_name: Option<String>,
    #[prost(string, optional, tag = "5")]
    error_msg: Option<String>,
}

/// `hadoop.hdfs.ExtendedBlockProto`: a block of a block pool.
#[derive(Clone, PartialEq, Eq, Hash, Message)]
pub(crate) struct ExtendedBlock {
    #[prost(string, required, tag = "1")]
    pub pool_id: String,
    #[prost(uint64, required, tag = "2")]
    pub block_id: u64,
    #[prost(uint64, required, tag = "3")]
    pub generation_stamp: u64,
    #[prost(uint64, optional, tag = "4")]
    pub num_bytes: Option<u64>,
}

/// `hadoop.common.TokenProto`: a block token (all four empty when the
/// cluster does not use block tokens).
#[derive(Clone, PartialEq, Eq, Message)]
pub(crate) struct Token {
    #[prost(bytes = "vec", required, tag = "1")]
    pub identifier: Vec<u8>,
    #[prost(bytes = "vec", required, tag = "2")]
    pub password: Vec<u8>,
    #[prost(string, required, tag = "3")]
    pub kind: String,
    #[prost(string, required, tag = "4")]
    pub service: String,
}

#[derive(Clone, PartialEq, Message)]
struct GetBlockLocalPathInfoRequest {
    #[prost(message, required, tag = "1")]
    block: ExtendedBlock,
    #[prost(message, required, tag = "2")]
    token: Token,
}

#[derive(Clone, PartialEq, Message)]
struct GetBlockLocalPathInfoResponse {
    #[prost(message, required, tag = "1")]
    block: ExtendedBlock,
    #[prost(string, required, tag = "2")]
    local_path: String,
    #[prost(string, required, tag = "3")]
    local_meta_path: String,
}

#[derive(Clone, PartialEq, Message)]
struct GetBlockLocationsRequest {
    #[prost(string, required, tag = "1")]
    src: String,
    #[prost(uint64, required, tag = "2")]
    offset: u64,
    #[prost(uint64, required, tag = "3")]
    length: u64,
}

#[derive(Clone, PartialEq, Message)]
struct GetBlockLocationsResponse {
    #[prost(message, optional, tag = "1")]
    locations: Option<LocatedBlocks>,
}

#[derive(Clone, PartialEq, Message)]
struct GetListingRequest {
    #[prost(string, required, tag = "1")]
    src: String,
    #[prost(bytes = "vec", required, tag = "2")]
    start_after: Vec<u8>,
    #[prost(bool, required, tag = "3")]
    need_location: bool,
}

#[derive(Clone, PartialEq, Message)]
struct GetListingResponse {
    #[prost(message, optional, tag = "1")]
    dir_list: Option<DirectoryListing>,
}

#[derive(Clone, PartialEq, Message)]
struct DirectoryListing {
    #[prost(message, repeated, tag = "1")]
    partial_listing: Vec<FileStatus>,
    #[prost(uint32, required, tag = "2")]
    remaining_entries: u32,
}

/// `hadoop.hdfs.HdfsFileStatusProto` (the fields read).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct FileStatus {
    /// `IS_DIR` 1, `IS_FILE` 2, `IS_SYMLINK` 3.
    #[prost(int32, required, tag = "1")]
    pub file_type: i32,
    /// The name within its directory.
    #[prost(bytes = "vec", required, tag = "2")]
    pub path: Vec<u8>,
    #[prost(message, optional, tag = "12")]
    pub locations: Option<LocatedBlocks>,
    #[prost(bytes = "vec", optional, tag = "15")]
    pub file_encryption_info: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "17")]
    pub ec_policy: Option<Vec<u8>>,
}

/// `hadoop.hdfs.LocatedBlocksProto`: a file's blocks (the fields read).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct LocatedBlocks {
    #[prost(uint64, required, tag = "1")]
    pub file_length: u64,
    #[prost(message, repeated, tag = "2")]
    pub blocks: Vec<LocatedBlock>,
    #[prost(bool, required, tag = "3")]
    pub under_construction: bool,
    /// Set for a file in an encryption zone (its replicas hold cipher
    /// text): kept as bytes, only its presence matters.
    #[prost(bytes = "vec", optional, tag = "6")]
    pub file_encryption_info: Option<Vec<u8>>,
    /// Set for an erasure-coded file (its blocks are striped).
    #[prost(bytes = "vec", optional, tag = "7")]
    pub ec_policy: Option<Vec<u8>>,
}

/// `hadoop.hdfs.LocatedBlockProto` (its required fields: it is also
/// sent back to report a damaged replica).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct LocatedBlock {
    #[prost(message, required, tag = "1")]
    pub b: ExtendedBlock,
    #[prost(uint64, required, tag = "2")]
    pub offset: u64,
    #[prost(message, repeated, tag = "3")]
    pub locs: Vec<DatanodeInfo>,
    #[prost(bool, required, tag = "4")]
    pub corrupt: bool,
    #[prost(message, required, tag = "5")]
    pub block_token: Token,
}

/// `hadoop.hdfs.DatanodeInfoProto` (its id only).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct DatanodeInfo {
    #[prost(message, required, tag = "1")]
    pub id: DatanodeId,
}

/// `hadoop.hdfs.DatanodeIDProto` (its required fields).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct DatanodeId {
    #[prost(string, required, tag = "1")]
    pub ip_addr: String,
    #[prost(string, required, tag = "2")]
    pub host_name: String,
    #[prost(string, required, tag = "3")]
    pub datanode_uuid: String,
    #[prost(uint32, required, tag = "4")]
    pub xfer_port: u32,
    #[prost(uint32, required, tag = "5")]
    pub info_port: u32,
    #[prost(uint32, required, tag = "6")]
    pub ipc_port: u32,
}

#[derive(Clone, PartialEq, Message)]
struct ReportBadBlocksRequest {
    #[prost(message, repeated, tag = "1")]
    blocks: Vec<LocatedBlock>,
}

#[derive(Clone, PartialEq, Message)]
struct ReportBadBlocksResponse {}

/// Where a replica lies on this host's disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalPaths {
    /// The block's bytes.
    pub data: String,
    /// Its checksums (`BlockMetadataHeader`, then one per chunk).
    pub meta: String,
}

/// Why a call failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The DataNode could not be reached or the exchange broke off.
    Io(std::io::Error),
    /// The DataNode answered with an error: its exception's class and
    /// message (e.g. `AccessControlException` for a user not in
    /// `dfs.block.local-path-access.user`).
    Remote { class: String, message: String },
    /// The answer did not parse.
    Malformed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Io(e) => write!(f, "{e}"),
            CallError::Remote { class, message } => write!(f, "{class}: {message}"),
            CallError::Malformed(why) => write!(f, "a malformed answer ({why})"),
        }
    }
}

impl From<std::io::Error> for CallError {
    fn from(e: std::io::Error) -> Self {
        CallError::Io(e)
    }
}

/// Asks the DataNode whose IPC server is at `addr`, as `user`, where its
/// replica of `block` lies.
pub(crate) fn block_local_paths(
    addr: SocketAddr,
    user: &str,
    block: &ExtendedBlock,
    token: &Token,
) -> Result<LocalPaths, CallError> {
    let request = GetBlockLocalPathInfoRequest {
        block: block.clone(),
        token: token.clone(),
    };
    let response: GetBlockLocalPathInfoResponse =
        call(addr, user, DATANODE, "getBlockLocalPathInfo", &request)?;
    Ok(LocalPaths {
        data: response.local_path,
        meta: response.local_meta_path,
    })
}

/// Asks the NameNode at `addr`, as `user`, for the blocks of the file at
/// `path` (its first `len` bytes).
pub(crate) fn block_locations(
    addr: SocketAddr,
    user: &str,
    path: &str,
    len: u64,
) -> Result<LocatedBlocks, CallError> {
    let request = GetBlockLocationsRequest {
        src: path.into(),
        offset: 0,
        length: len,
    };
    let response: GetBlockLocationsResponse =
        call(addr, user, NAMENODE, "getBlockLocations", &request)?;
    response
        .locations
        .ok_or_else(|| CallError::Malformed(format!("no blocks for {path}")))
}

/// Asks the NameNode at `addr`, as `user`, for the entries of the
/// directory `dir` with each file's blocks (`getListing` with
/// `needLocation`, page after page).
pub(crate) fn listing_with_blocks(
    addr: SocketAddr,
    user: &str,
    dir: &str,
) -> Result<Vec<FileStatus>, CallError> {
    let mut out = Vec::new();
    let mut after = Vec::new();
    loop {
        let request = GetListingRequest {
            src: dir.into(),
            start_after: after,
            need_location: true,
        };
        let response: GetListingResponse = call(addr, user, NAMENODE, "getListing", &request)?;
        let list = response
            .dir_list
            .ok_or_else(|| CallError::Malformed(format!("no listing of {dir}")))?;
        after = match list.partial_listing.last() {
            Some(last) => last.path.clone(),
            None => return Ok(out),
        };
        out.extend(list.partial_listing);
        if list.remaining_entries == 0 {
            return Ok(out);
        }
    }
}

/// Tells the NameNode at `addr`, as `user`, that the replicas of
/// `block` on its `locs` are damaged (`reportBadBlocks`, as Hadoop's
/// client does on a checksum failure): the NameNode marks them corrupt
/// and copies a good replica in their place.
pub(crate) fn report_bad_block(
    addr: SocketAddr,
    user: &str,
    block: LocatedBlock,
) -> Result<(), CallError> {
    let request = ReportBadBlocksRequest {
        blocks: vec![block],
    };
    let _: ReportBadBlocksResponse = call(addr, user, NAMENODE, "reportBadBlocks", &request)?;
    Ok(())
}

/// One call of `protocol`'s `method`, on a connection kept from an
/// earlier call to the same server as the same user when there is one
/// (both calls only read, so one that meets a connection the server has
/// closed since is made again on a new one).
fn call<M: Message + Default>(
    addr: SocketAddr,
    user: &str,
    protocol: &'static str,
    method: &str,
    request: &impl Message,
) -> Result<M, CallError> {
    let key = (addr, user.to_owned(), protocol);
    // (Taken in a statement of its own: the pool's lock is not held
    // through the call.)
    let kept = pool()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key);
    if let Some(mut c) = kept {
        match c.call(protocol, method, request) {
            Err(CallError::Io(_)) => {}
            answer => {
                keep(key, c);
                return answer;
            }
        }
    }
    let mut c = Connection::open(addr, user, protocol)?;
    let answer = c.call(protocol, method, request);
    if !matches!(answer, Err(CallError::Io(_))) {
        keep(key, c);
    }
    answer
}

type PoolKey = (SocketAddr, String, &'static str);

/// Connections between calls, one per server, user and protocol.
fn pool() -> &'static Mutex<HashMap<PoolKey, Connection>> {
    static POOL: OnceLock<Mutex<HashMap<PoolKey, Connection>>> = OnceLock::new();
    POOL.get_or_init(Default::default)
}

fn keep(key: PoolKey, c: Connection) {
    pool()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, c);
}

/// A connection whose context has been sent.
struct Connection {
    s: TcpStream,
    client_id: [u8; 16],
    next_call: i32,
}

impl Connection {
    fn open(addr: SocketAddr, user: &str, protocol: &str) -> Result<Connection, CallError> {
        let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)?;
        s.set_read_timeout(Some(TIMEOUT))?;
        s.set_write_timeout(Some(TIMEOUT))?;
        s.set_nodelay(true)?;
        let client_id: [u8; 16] = rand::random();
        s.write_all(&context(user, protocol, &client_id))?;
        Ok(Connection {
            s,
            client_id,
            next_call: 0,
        })
    }

    fn call<M: Message + Default>(
        &mut self,
        protocol: &str,
        method: &str,
        request: &impl Message,
    ) -> Result<M, CallError> {
        let id = self.next_call;
        self.next_call = self.next_call.wrapping_add(1) & i32::MAX;
        self.s
            .write_all(&call_packet(id, &self.client_id, protocol, method, request))?;
        answer_of(&read_packet(&mut self.s)?, id)
    }
}

/// The preamble and the connection context, as the bytes to send.
fn context(user: &str, protocol: &str, client_id: &[u8; 16]) -> Vec<u8> {
    let mut out = b"hrpc\x09\x00\x00".to_vec();
    let context = IpcConnectionContext {
        user_info: Some(UserInformation {
            effective_user: Some(user.into()),
        }),
        protocol: Some(protocol.into()),
    };
    packet(&mut out, &[&header(CONTEXT_CALL, client_id), &context]);
    out
}

/// One call of `protocol`'s `method`, as the bytes to send.
fn call_packet(
    id: i32,
    client_id: &[u8; 16],
    protocol: &str,
    method: &str,
    request: &impl Message,
) -> Vec<u8> {
    let call = RequestHeader {
        method_name: method.into(),
        declaring_class_protocol_name: protocol.into(),
        client_protocol_version: PROTOCOL_VERSION,
    };
    let mut out = Vec::new();
    packet(&mut out, &[&header(id, client_id), &call, request]);
    out
}

fn header(call_id: i32, client_id: &[u8; 16]) -> RpcRequestHeader {
    RpcRequestHeader {
        rpc_kind: Some(RPC_PROTOCOL_BUFFER),
        rpc_op: Some(0),
        call_id,
        client_id: client_id.to_vec(),
        retry_count: Some(-1),
    }
}

/// Appends the messages, each delimited, after their total length.
fn packet(out: &mut Vec<u8>, messages: &[&dyn MessageBytes]) {
    let body: Vec<u8> = messages.iter().flat_map(|m| m.delimited()).collect();
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
}

/// A message as length-delimited bytes (object-safe, for [`packet`]).
trait MessageBytes {
    fn delimited(&self) -> Vec<u8>;
}

impl<M: Message> MessageBytes for M {
    fn delimited(&self) -> Vec<u8> {
        self.encode_length_delimited_to_vec()
    }
}

/// One answer packet's bytes.
fn read_packet(s: &mut impl Read) -> Result<Vec<u8>, CallError> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len);
    if len > MAX_ANSWER {
        return Err(CallError::Malformed(format!("an answer of {len} bytes")));
    }
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

/// The answer's message, or the error its header carries.
fn answer_of<M: Message + Default>(packet: &[u8], call: i32) -> Result<M, CallError> {
    let mut buf = packet;
    let header = RpcResponseHeader::decode_length_delimited(&mut buf)
        .map_err(|e| CallError::Malformed(e.to_string()))?;
    if header.call_id as i32 != call {
        // Not this call's answer: the connection is out of step.
        return Err(CallError::Io(std::io::Error::other(format!(
            "the answer to call {} where {call} was asked",
            header.call_id
        ))));
    }
    if header.status != 0 {
        return Err(CallError::Remote {
            class: header.exception_class_name.unwrap_or_default(),
            message: header.error_msg.unwrap_or_default(),
        });
    }
    M::decode_length_delimited(&mut buf).map_err(|e| CallError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block() -> ExtendedBlock {
        ExtendedBlock {
            pool_id: "BP-1".into(),
            block_id: 1073741825,
            generation_stamp: 1001,
            num_bytes: Some(3000),
        }
    }

    #[test]
    fn the_exchange_has_hadoops_framing() {
        let id = [7; 16];
        let mut bytes = context("root", DATANODE, &id);
        bytes.extend(call_packet(
            0,
            &id,
            DATANODE,
            "getBlockLocalPathInfo",
            &block(),
        ));
        assert_eq!(&bytes[..7], b"hrpc\x09\x00\x00");
        // The context packet: its length, then a header whose call id is
        // -3 (zigzag 5), then the context naming the user and protocol.
        let len = u32::from_be_bytes(bytes[7..11].try_into().unwrap()) as usize;
        let mut ctx = &bytes[11..11 + len];
        let h = RpcRequestHeader::decode_length_delimited(&mut ctx).unwrap();
        assert_eq!(
            (h.call_id, h.rpc_kind, h.client_id),
            (-3, Some(2), id.to_vec())
        );
        let c = IpcConnectionContext::decode_length_delimited(&mut ctx).unwrap();
        assert_eq!(c.user_info.unwrap().effective_user.as_deref(), Some("root"));
        assert_eq!(c.protocol.as_deref(), Some(DATANODE));
        assert!(ctx.is_empty());
        // The call packet, to the end.
        let rest = &bytes[11 + len..];
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        assert_eq!(rest.len(), 4 + len);
        let mut call = &rest[4..];
        let h = RpcRequestHeader::decode_length_delimited(&mut call).unwrap();
        assert_eq!(h.call_id, 0);
        let r = RequestHeader::decode_length_delimited(&mut call).unwrap();
        assert_eq!(r.method_name, "getBlockLocalPathInfo");
        assert_eq!(r.client_protocol_version, 1);
        assert_eq!(
            ExtendedBlock::decode_length_delimited(&mut call).unwrap(),
            block()
        );
    }

    #[test]
    fn callid_minus_three_is_zigzag_encoded_as_hadoop_expects() {
        // Hadoop's own client sends 1a 08 02 10 00 18 05 ...: field 3 is
        // sint32, so -3 is 5 on the wire.
        let h = header(CONTEXT_CALL, &[0; 16]).encode_length_delimited_to_vec();
        assert_eq!(&h[..7], &[0x1a, 0x08, 0x02, 0x10, 0x00, 0x18, 0x05]);
    }

    fn answer(header: RpcResponseHeader, body: Option<&dyn MessageBytes>) -> Vec<u8> {
        let mut out = header.encode_length_delimited_to_vec();
        if let Some(b) = body {
            out.extend(b.delimited());
        }
        out
    }

    #[test]
    fn answers_give_the_paths_or_the_datanodes_error() {
        let ok = GetBlockLocalPathInfoResponse {
            block: block(),
            local_path: "/d/blk_1".into(),
            local_meta_path: "/d/blk_1_1001.meta".into(),
        };
        let header = |status| RpcResponseHeader {
            call_id: 0,
            status,
            exception_class_name: None,
            error_msg: None,
        };
        let got: GetBlockLocalPathInfoResponse =
            answer_of(&answer(header(0), Some(&ok)), 0).unwrap();
        assert_eq!(got.local_meta_path, "/d/blk_1_1001.meta");
        let refused = RpcResponseHeader {
            exception_class_name: Some("org.apache.hadoop.security.AccessControlException".into()),
            error_msg: Some("The user alice is not configured".into()),
            ..header(1)
        };
        let e = answer_of::<GetBlockLocalPathInfoResponse>(&answer(refused, None), 0).unwrap_err();
        assert!(
            e.to_string()
                .contains("AccessControlException: The user alice"),
            "{e}"
        );
        let e = answer_of::<GetBlockLocalPathInfoResponse>(&[0x05, 0x01], 0).unwrap_err();
        assert!(matches!(e, CallError::Malformed(_)), "{e}");
        // Another call's answer: the connection is not trusted again.
        let e = answer_of::<GetBlockLocalPathInfoResponse>(&answer(header(0), Some(&ok)), 1);
        assert!(matches!(e, Err(CallError::Io(_))));
        assert!(matches!(
            read_packet(&mut &[0xff, 0, 0, 0][..]),
            Err(CallError::Malformed(_))
        ));
    }

    /// A server that answers `getBlockLocalPathInfo` with the call's
    /// block id in the path; it closes each connection after `per_conn`
    /// calls. Returns its address and a count of connections accepted.
    fn fake_datanode(
        per_conn: usize,
    ) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let conns = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = conns.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let mut s = s.unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                let mut pre = [0u8; 7];
                s.read_exact(&mut pre).unwrap();
                assert_eq!(&pre, b"hrpc\x09\x00\x00");
                read_packet(&mut s).unwrap(); // the context
                for _ in 0..per_conn {
                    let Ok(p) = read_packet(&mut s) else { break };
                    let mut b = p.as_slice();
                    let h = RpcRequestHeader::decode_length_delimited(&mut b).unwrap();
                    RequestHeader::decode_length_delimited(&mut b).unwrap();
                    let r = GetBlockLocalPathInfoRequest::decode_length_delimited(&mut b).unwrap();
                    let mut out = RpcResponseHeader {
                        call_id: h.call_id as u32,
                        status: 0,
                        exception_class_name: None,
                        error_msg: None,
                    }
                    .encode_length_delimited_to_vec();
                    out.extend(
                        GetBlockLocalPathInfoResponse {
                            local_path: format!("/d/blk_{}", r.block.block_id),
                            local_meta_path: String::new(),
                            block: r.block,
                        }
                        .encode_length_delimited_to_vec(),
                    );
                    s.write_all(&(out.len() as u32).to_be_bytes()).unwrap();
                    s.write_all(&out).unwrap();
                }
            }
        });
        (addr, conns)
    }

    #[test]
    fn calls_share_a_connection_and_survive_its_close() {
        use std::sync::atomic::Ordering;
        let (addr, conns) = fake_datanode(2);
        let ask = |id| {
            let b = ExtendedBlock {
                block_id: id,
                ..block()
            };
            block_local_paths(addr, "u", &b, &Token::default())
                .unwrap()
                .data
        };
        // Two calls on one connection; the server then closes it, and the
        // third call is made again on a new one.
        assert_eq!(ask(1), "/d/blk_1");
        assert_eq!(ask(2), "/d/blk_2");
        assert_eq!(conns.load(Ordering::SeqCst), 1);
        assert_eq!(ask(3), "/d/blk_3");
        assert_eq!(ask(4), "/d/blk_4");
        assert_eq!(conns.load(Ordering::SeqCst), 2);
        // Another user: a connection of its own.
        let b = block();
        assert!(block_local_paths(addr, "v", &b, &Token::default()).is_ok());
        assert_eq!(conns.load(Ordering::SeqCst), 3);
    }
}
