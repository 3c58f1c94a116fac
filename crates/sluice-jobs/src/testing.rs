//! Helpers of the jobs' unit tests.

/// A sink that keeps every pair a job emits (raw output as keys).
pub(crate) struct Pairs(pub Vec<(Vec<u8>, Vec<u8>)>);

impl sluice_api::Sink for Pairs {
    fn emit(&mut self, key: &[u8], value: &[u8]) -> sluice_api::Result<()> {
        self.0.push((key.to_vec(), value.to_vec()));
        Ok(())
    }
}
