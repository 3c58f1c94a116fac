//! TestDFSIO, as Hadoop's: map task `i` writes file `i` of a given size
//! (the write test), or each map reads its part of those files back (the
//! read test), each timing its own I/O and reporting it in counters that
//! the driver turns into throughput and average I/O rate.
//!
//! The files are lines of [`LINE`] bytes that check themselves: line `n`
//! of file `f` is `f` (8 hex digits), `n` (12 hex digits), a hash of the
//! seed, `f` and `n` (16 hex digits), 63 filler letters drawn from the
//! hash, and a newline. The read test fails on any line that is not what
//! the write test wrote.

use std::time::Instant;

use sluice_api::{Error, JobSpec, MapContext, Mapper, Result};

/// The user counter group of TestDFSIO.
pub const COUNTER_GROUP: &str = "DFSIO";
/// Bytes of one line.
pub const LINE: usize = 100;

/// Each task's counters, summed over tasks: tasks, bytes, microseconds of
/// I/O, the sum of the tasks' rates (MB/s x 1e6) and of their squares
/// (x 1e6).
pub const TASKS: &str = "TASKS";
pub const BYTES: &str = "BYTES";
pub const MICROS: &str = "MICROS";
pub const RATE_SUM: &str = "RATE_SUM";
pub const RATE_SQ_SUM: &str = "RATE_SQ_SUM";

fn hash(seed: u64, file: u64, n: u64) -> u64 {
    let mut h =
        seed ^ file.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ n.wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    h ^= h >> 31;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 29;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 32)
}

/// Writes line `n` of file `file` into `out`.
pub fn line(seed: u64, file: u64, n: u64, out: &mut [u8; LINE]) {
    use std::io::Write;
    let h = hash(seed, file, n);
    let mut head = &mut out[..36];
    let _ = write!(
        head,
        "{:08x}{:012x}{h:016x}",
        file as u32,
        n & 0xffff_ffff_ffff
    );
    let mut x = h;
    for b in &mut out[36..LINE - 1] {
        x = x.rotate_left(5) ^ 0x5bd1_e995;
        *b = b'a' + (x % 26) as u8;
    }
    out[LINE - 1] = b'\n';
}

/// Adds one task's I/O to the counters.
fn count(ctx: &mut MapContext<'_>, bytes: u64, started: Instant) {
    let micros = started.elapsed().as_micros().max(1) as u64;
    let rate = bytes as f64 / 1e6 / (micros as f64 / 1e6);
    let c = ctx.counters();
    c.incr(COUNTER_GROUP, TASKS, 1);
    c.incr(COUNTER_GROUP, BYTES, bytes);
    c.incr(COUNTER_GROUP, MICROS, micros);
    c.incr(COUNTER_GROUP, RATE_SUM, (rate * 1e6) as u64);
    c.incr(COUNTER_GROUP, RATE_SQ_SUM, (rate * rate * 1e6) as u64);
}

/// The write test: map task `i` (of a synthetic input) writes file `i`,
/// `size` bytes rounded up to whole lines.
pub fn dfsio_write(size: u64, seed: u64) -> JobSpec {
    JobSpec::new("dfsio-write", move || WriteMapper { size, seed })
}

struct WriteMapper {
    size: u64,
    seed: u64,
}

impl Mapper for WriteMapper {
    fn map(&mut self, _offset: u64, _record: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let started = Instant::now();
        let file = ctx.task() as u64;
        let lines = self.size.div_ceil(LINE as u64);
        let mut buf = Vec::with_capacity(1 << 20);
        let mut l = [0u8; LINE];
        for n in 0..lines {
            line(self.seed, file, n, &mut l);
            buf.extend_from_slice(&l);
            if buf.len() + LINE > 1 << 20 {
                ctx.emit_raw(&buf)?;
                buf.clear();
            }
        }
        ctx.emit_raw(&buf)?;
        count(ctx, lines * LINE as u64, started);
        Ok(())
    }
}

/// The read test: every line read is checked against what the write test
/// wrote with `seed`; nothing is written.
pub fn dfsio_read(seed: u64) -> JobSpec {
    JobSpec::new("dfsio-read", move || ReadMapper {
        seed,
        started: None,
        bytes: 0,
        want: [0; LINE],
    })
}

struct ReadMapper {
    seed: u64,
    started: Option<Instant>,
    bytes: u64,
    want: [u8; LINE],
}

fn hex(field: &[u8]) -> Option<u64> {
    u64::from_str_radix(std::str::from_utf8(field).ok()?, 16).ok()
}

impl Mapper for ReadMapper {
    fn setup(&mut self, _ctx: &mut MapContext<'_>) -> Result<()> {
        self.started = Some(Instant::now());
        self.bytes = 0;
        Ok(())
    }

    fn map(&mut self, _offset: u64, record: &[u8], _ctx: &mut MapContext<'_>) -> Result<()> {
        let (Some(file), Some(n)) = (
            record.get(..8).and_then(hex),
            record.get(8..20).and_then(hex),
        ) else {
            return Err(Error::user(
                "a TestDFSIO line without its file and line numbers",
            ));
        };
        line(self.seed, file, n, &mut self.want);
        if record != &self.want[..LINE - 1] {
            return Err(Error::user(format!(
                "line {n} of file {file} is not what the write test wrote"
            )));
        }
        self.bytes += LINE as u64;
        Ok(())
    }

    fn cleanup(&mut self, ctx: &mut MapContext<'_>) -> Result<()> {
        let started = self.started.take().unwrap_or_else(Instant::now);
        count(ctx, self.bytes, started);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_check_themselves() {
        let mut a = [0u8; LINE];
        line(3, 7, 123_456, &mut a);
        assert_eq!(a[LINE - 1], b'\n');
        assert_eq!(hex(&a[..8]), Some(7));
        assert_eq!(hex(&a[8..20]), Some(123_456));
        let mut b = [0u8; LINE];
        line(3, 7, 123_457, &mut b);
        assert_ne!(a, b);
        line(4, 7, 123_456, &mut b);
        assert_ne!(a, b, "the seed matters");
    }
}
