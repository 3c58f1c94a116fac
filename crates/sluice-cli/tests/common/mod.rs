//! Helpers shared by the binary's integration tests.

use std::process::{Command, Output};

/// The `sluice` binary under test.
pub fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// Asserts the command succeeded, showing its output if not.
pub fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "sluice failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
