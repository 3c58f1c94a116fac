//! The engine's failure of a task as the cluster reports it.

use sluice_proto::ClusterError;

/// An engine error as a task failure: its message, and the damage it met
/// in an input file when that was the cause (so the replica is blamed,
/// not the task).
pub(crate) fn engine_failure(e: sluice_engine::EngineError) -> ClusterError {
    let damaged_input = match &e {
        sluice_engine::EngineError::Format(sluice_formats::FormatError::Damaged {
            path,
            damage,
        }) => Some(sluice_proto::InputDamage {
            path: path.clone(),
            damage: damage.to_string(),
        }),
        _ => None,
    };
    ClusterError::Task {
        msg: e.to_string(),
        damaged_input,
    }
}
