//! Compiles the control-plane protocol with protox (a Rust protobuf
//! compiler), so building Sluice needs no `protoc`.

fn main() {
    println!("cargo:rerun-if-changed=proto/sluice.proto");
    let fds = protox::compile(["proto/sluice.proto"], ["proto"]).expect("proto/sluice.proto");
    tonic_prost_build::configure()
        .compile_fds(fds)
        .expect("generating the control-plane code");
}
