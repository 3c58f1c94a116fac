//! Compiles the etcd v3 API subset with protox (a Rust protobuf compiler),
//! so building Sluice needs no `protoc`. Client code only.

fn main() {
    println!("cargo:rerun-if-changed=proto/etcd.proto");
    let fds = protox::compile(["proto/etcd.proto"], ["proto"]).expect("proto/etcd.proto");
    tonic_prost_build::configure()
        .build_server(false)
        .compile_fds(fds)
        .expect("generating the etcd client code");
}
