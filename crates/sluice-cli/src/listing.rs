//! Lines on standard output that stop quietly when the reader goes away.

/// A listing's lines on standard output. A reader that went away
/// (`sluice ls NAME | head`) ends the listing quietly, as `ls` does,
/// instead of a panic on the broken pipe.
pub(crate) struct Listing(std::io::StdoutLock<'static>);

impl Listing {
    pub(crate) fn new() -> Self {
        Listing(std::io::stdout().lock())
    }

    /// Writes one line; `false` once the reader is gone.
    pub(crate) fn line(&mut self, text: std::fmt::Arguments<'_>) -> anyhow::Result<bool> {
        use std::io::Write;
        match writeln!(self.0, "{text}") {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
