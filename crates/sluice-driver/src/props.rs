//! The job properties the driver sets on the requests it runs, unless the
//! user set them.

use sluice_request::{JobRequest, OutputFormat, OUTPUT_SYNC_PROPERTY};

/// Makes `stage` write temporary `temp`: overwritten if a stale one is
/// there, not synced (the stages after read it, and it is removed
/// whatever happens), and text, as the stages after read it, whatever
/// format the chain's own output is.
pub(crate) fn to_temporary(stage: &mut JobRequest, temp: &str) {
    stage.output = temp.to_owned();
    stage.overwrite = true;
    stage.engine.output_format = OutputFormat::Text;
    unsynced(stage);
}

/// Leaves `req`'s output files unsynced unless the user said otherwise:
/// for output that is read once and removed (a chain's temporaries, the
/// staging of output bound for an external store, whose durability is
/// the store's).
pub(crate) fn unsynced(req: &mut JobRequest) {
    set_default(req, OUTPUT_SYNC_PROPERTY, "false");
}

/// Sets property `key` of `stage` to `value` unless the user set it.
pub(crate) fn set_default(stage: &mut JobRequest, key: &str, value: &str) {
    stage
        .properties
        .entry(key.to_owned())
        .or_insert_with(|| value.to_owned());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage() -> JobRequest {
        JobRequest::new("wordcount", &serde_json::Value::Null, "data", "")
    }

    /// A stage writing a temporary overwrites it as text and does not
    /// sync it, unless the user said to; the engine takes the property.
    #[test]
    fn temporaries_are_not_synced() {
        let mut s = stage();
        s.engine.output_format = OutputFormat::Parquet;
        assert!(s.syncs_output());
        to_temporary(&mut s, "t0");
        assert_eq!((s.output.as_str(), s.overwrite), ("t0", true));
        assert_eq!(s.engine.output_format, OutputFormat::Text);
        assert!(!s.syncs_output());
        assert!(!sluice_request::settings(&s).sync_output);
        let mut kept = stage();
        kept.properties
            .insert(OUTPUT_SYNC_PROPERTY.to_owned(), "true".to_owned());
        to_temporary(&mut kept, "t1");
        assert!(kept.syncs_output() && sluice_request::settings(&kept).sync_output);
        assert!(sluice_request::settings(&stage()).sync_output);
    }
}
