//! The local engine end to end: answers checked against independent
//! oracles, and every failure mode leaving no committed output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_api::{Error as ApiError, JobSpec, MapContext, Mapper, TaskCounter};
use sluice_engine::{run_job, BadRecordPolicy, EngineConfig, EngineError, JobReport, Progress};
use sluice_jobs::Grouping;

fn cfg(threads: usize, memory: u64, reducers: u32) -> EngineConfig {
    EngineConfig {
        threads,
        memory,
        reducers,
        split_size: Some(64 << 10),
        ..EngineConfig::default()
    }
}

fn run(
    job: &JobSpec,
    input: &Path,
    out: &Path,
    cfg: &EngineConfig,
) -> Result<JobReport, EngineError> {
    run_job(job, input.to_str().unwrap(), out, cfg, &Progress::default())
}

fn gen_text(dir: &Path, size: u64, vocabulary: usize) -> PathBuf {
    let data = dir.join("text");
    std::fs::create_dir_all(&data).unwrap();
    let spec = sluice_gen::TextSpec {
        size,
        vocabulary,
        part_size: size / 3 + 1,
        threads: 2,
        ..Default::default()
    };
    sluice_gen::generate_text(&spec, &data, &|_| {}).unwrap();
    data
}

fn input_lines(dir: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut lines = Vec::new();
    for f in files {
        let bytes = std::fs::read(f).unwrap();
        lines.extend(
            bytes
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec),
        );
    }
    lines
}

/// Lines of every `prefix*` file of an output, in part-number order.
fn output_lines(out: &Path, prefix: &str) -> Vec<Vec<u8>> {
    let mut parts: Vec<_> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    parts.sort();
    let mut lines = Vec::new();
    for p in parts {
        let bytes = std::fs::read(p).unwrap();
        lines.extend(bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec));
        lines.pop();
    }
    lines
}

fn oracle_counts(lines: &[Vec<u8>]) -> BTreeMap<Vec<u8>, u64> {
    let mut m = BTreeMap::new();
    for l in lines {
        for w in l
            .split(|&b| sluice_jobs::is_delimiter(b))
            .filter(|w| !w.is_empty())
        {
            *m.entry(w.to_vec()).or_insert(0) += 1;
        }
    }
    m
}

fn parse_counts(out: &Path) -> BTreeMap<Vec<u8>, u64> {
    let mut m = BTreeMap::new();
    for l in output_lines(out, "part-r-") {
        let tab = l.iter().rposition(|&b| b == b'\t').unwrap();
        let n = std::str::from_utf8(&l[tab + 1..]).unwrap().parse().unwrap();
        assert!(m.insert(l[..tab].to_vec(), n).is_none(), "duplicate key");
    }
    m
}

fn assert_no_output(out: &Path) {
    assert!(!out.exists(), "failed job left {}", out.display());
    let parent = out.parent().unwrap();
    let leftovers: Vec<_> = std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".sluice-"))
        .collect();
    assert!(leftovers.is_empty(), "staging left behind: {leftovers:?}");
}

#[test]
fn wordcount_matches_the_oracle_under_every_grouping_and_memory() {
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 3 << 20, 20_000);
    let want = oracle_counts(&input_lines(&data));
    let mut i = 0;
    for grouping in [Grouping::Hash, Grouping::Sort] {
        for (threads, memory, reducers, merge_factor) in
            [(2, 1 << 30, 3, 64), (2, 1 << 20, 2, 2), (1, 1 << 20, 1, 3)]
        {
            i += 1;
            let out = d.path().join(format!("out{i}"));
            let mut c = cfg(threads, memory, reducers);
            c.merge_factor = Some(merge_factor);
            let r = run(&sluice_jobs::wordcount(grouping), &data, &out, &c).unwrap();
            assert_eq!(
                parse_counts(&out),
                want,
                "{grouping:?} {threads} {memory} {reducers}"
            );
            assert!(out.join("_SUCCESS").exists());
            assert_eq!(
                r.counter(TaskCounter::ReduceOutputRecords),
                want.len() as u64
            );
            assert_eq!(
                r.counter(TaskCounter::MapOutputRecords),
                want.values().sum::<u64>()
            );
            if memory == 1 << 20 {
                assert!(
                    r.spill_files > 2,
                    "a small budget spills ({} runs)",
                    r.spill_files
                );
            }
            if merge_factor == 2 {
                assert!(r.merge_passes > 0);
            }
        }
    }
}

/// A combiner that is costly to start (a Streaming process per spilled
/// partition) makes each map thread collect up to its whole budget
/// before it spills: one run a thread here, where the small spills that
/// suit an in-process combiner make several; the counts are the same.
#[test]
fn a_costly_combiner_spills_once_a_thread_when_the_budget_allows() {
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 4 << 20, 20_000);
    let want = oracle_counts(&input_lines(&data));
    let c = cfg(2, 1 << 30, 2);
    let cheap = sluice_jobs::wordcount(Grouping::Sort);
    let mut costly = cheap.clone();
    costly.costly_combiner = true;
    // Smaller than any machine's default, so that 4 MiB makes several.
    let small_buffer = EngineConfig {
        sort_buffer: Some(2 << 20),
        ..c.clone()
    };
    let small = run(&cheap, &data, &d.path().join("cheap"), &small_buffer).unwrap();
    let whole = run(&costly, &data, &d.path().join("costly"), &c).unwrap();
    assert_eq!(parse_counts(&d.path().join("cheap")), want);
    assert_eq!(parse_counts(&d.path().join("costly")), want);
    assert!(small.spill_files > 2, "{} runs", small.spill_files);
    assert_eq!(whole.spill_files, 2, "one run a thread");
}

/// Word count over words that hardly repeat: each map thread's hash
/// table gives up once it holds 8 MiB of keys it did not reduce, the rest
/// is sorted and combined at spill time, and the counts are exact; text
/// whose words repeat keeps its table.
#[test]
fn hash_grouping_that_does_not_reduce_gives_way_to_sorting() {
    let d = tempfile::tempdir().unwrap();
    for (vocabulary, stops) in [(4_000_000, true), (1_000, false)] {
        let data = d.path().join(format!("text-{vocabulary}"));
        std::fs::create_dir_all(&data).unwrap();
        let spec = sluice_gen::TextSpec {
            size: 12 << 20,
            vocabulary,
            exponent: 0.01,
            part_size: 4 << 20,
            threads: 2,
            ..Default::default()
        };
        sluice_gen::generate_text(&spec, &data, &|_| {}).unwrap();
        let want = oracle_counts(&input_lines(&data));
        let out = d.path().join(format!("out-{vocabulary}"));
        let c = cfg(2, 1 << 30, 2);
        let r = run(&sluice_jobs::wordcount(Grouping::Hash), &data, &out, &c).unwrap();
        assert_eq!(parse_counts(&out), want, "vocabulary {vocabulary}");
        let stopped = r.counter(TaskCounter::HashGroupingStopped);
        assert_eq!(
            stopped > 0,
            stops,
            "vocabulary {vocabulary}: {stopped} threads stopped"
        );
    }
}

#[test]
fn part_files_are_key_sorted_and_hadoop_partitioned() {
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 1 << 20, 5_000);
    let out = d.path().join("out");
    run(
        &sluice_jobs::wordcount(Grouping::Hash),
        &data,
        &out,
        &cfg(2, 1 << 30, 4),
    )
    .unwrap();
    for p in 0..4u32 {
        let lines = output_lines(&out, &format!("part-r-{p:05}"));
        let keys: Vec<&[u8]> = lines
            .iter()
            .map(|l| l.split(|&b| b == b'\t').next().unwrap())
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "part {p} sorted");
        for k in keys {
            assert_eq!(
                sluice_api::Partitioner::partition(&sluice_api::HashPartitioner, k, 4),
                p
            );
        }
    }
}

/// Sampled split points for the sort job over the lines of `data`.
fn sort_sample(data: &Path) -> Vec<Vec<u8>> {
    let files = sluice_formats::input::resolve(data.to_str().unwrap()).unwrap();
    let lines = sluice_formats::input::RecordFormat::Lines;
    let splits = sluice_formats::input::plan_splits(&files, 64 << 10, lines);
    sluice_engine::sample_records(&splits, lines, 1 << 20, 10).unwrap()
}

#[test]
fn sort_is_a_total_order_and_a_permutation_with_tiny_memory() {
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 4 << 20, 50);
    let mut want = input_lines(&data);
    want.sort();
    let out = d.path().join("sorted");
    let sample = sort_sample(&data);
    let mut c = cfg(2, 2 << 20, 3);
    c.merge_factor = Some(4);
    let r = run(&sluice_jobs::sort(sample, 3), &data, &out, &c).unwrap();
    assert_eq!(output_lines(&out, "part-r-"), want);
    assert!(r.merge_passes > 0 && r.spill_files > 4);
    // The range partitioner spread the lines over every part.
    for p in 0..3 {
        assert!(!output_lines(&out, &format!("part-r-{p:05}")).is_empty());
    }
}

#[test]
fn grep_writes_matching_lines_in_input_order() {
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 1 << 20, 1000);
    let lines = input_lines(&data);
    let re = regex::bytes::Regex::new("^[a-m]").unwrap();
    let want: Vec<_> = lines.iter().filter(|l| re.is_match(l)).cloned().collect();
    assert!(!want.is_empty());
    let out = d.path().join("g");
    let r = run(
        &sluice_jobs::grep("^[a-m]").unwrap(),
        &data,
        &out,
        &cfg(2, 1 << 30, 2),
    )
    .unwrap();
    assert_eq!(output_lines(&out, "part-m-"), want);
    assert_eq!(r.output_records, want.len() as u64);
}

#[test]
fn empty_input_gives_empty_output_with_success() {
    let d = tempfile::tempdir().unwrap();
    let empty_dir = d.path().join("in");
    std::fs::create_dir(&empty_dir).unwrap();
    std::fs::write(empty_dir.join("empty.txt"), b"").unwrap();
    let out = d.path().join("out");
    let r = run(
        &sluice_jobs::wordcount(Grouping::Hash),
        &empty_dir,
        &out,
        &cfg(2, 1 << 30, 2),
    )
    .unwrap();
    assert!(out.join("_SUCCESS").exists());
    assert!(output_lines(&out, "part-r-").is_empty());
    assert_eq!(r.output_records, 0);
}

#[test]
fn missing_input_fails_and_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    let err = run(
        &sluice_jobs::wordcount(Grouping::Hash),
        &d.path().join("nope"),
        &out,
        &cfg(1, 1 << 30, 1),
    )
    .unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert_no_output(&out);
}

/// A merge factor below two is refused before anything is written; an
/// unset one is taken from the budget.
#[test]
fn a_merge_factor_below_two_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 64 << 10, 100);
    let out = d.path().join("out");
    let mut c = cfg(1, 1 << 20, 1);
    c.merge_factor = Some(1);
    match run(&sluice_jobs::wordcount(Grouping::Sort), &data, &out, &c) {
        Err(EngineError::Config(m)) => assert!(m.contains("merge factor"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_no_output(&out);
    c.merge_factor = None;
    run(&sluice_jobs::wordcount(Grouping::Sort), &data, &out, &c).unwrap();
    assert_eq!(parse_counts(&out), oracle_counts(&input_lines(&data)));
}

#[test]
fn existing_output_is_refused_unless_overwrite() {
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 100_000, 100);
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep"), b"precious").unwrap();
    let job = sluice_jobs::wordcount(Grouping::Hash);
    let err = run(&job, &data, &out, &cfg(1, 1 << 30, 1)).unwrap_err();
    assert!(matches!(err, EngineError::OutputExists(_)), "{err}");
    assert_eq!(std::fs::read(out.join("keep")).unwrap(), b"precious");
    let mut c = cfg(1, 1 << 30, 1);
    c.overwrite = true;
    run(&job, &data, &out, &c).unwrap();
    assert!(!out.join("keep").exists() && out.join("_SUCCESS").exists());
}

/// For both groupings: sorted records combined at spill, and the hash
/// collector's partial aggregates.
#[test]
fn a_corrupted_spill_block_fails_the_job_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 2 << 20, 50_000);
    for grouping in [Grouping::Sort, Grouping::Hash] {
        let out = d.path().join(format!("out-{grouping:?}"));
        let mut c = cfg(2, 8 << 20, 2);
        c.spill_hook = Some(Arc::new(|p: &Path| {
            let mut b = std::fs::read(p).unwrap();
            b[100] ^= 0xff;
            std::fs::write(p, b).unwrap();
        }));
        let err = run(&sluice_jobs::wordcount(grouping), &data, &out, &c)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("checksum mismatch") && err.contains("spill-"),
            "{grouping:?}: {err}"
        );
        assert!(err.contains("offset"), "{grouping:?}: {err}");
        assert_no_output(&out);
    }
}

/// Parses `a|b` lines; the second field must be a number.
struct PipeMapper;

impl Mapper for PipeMapper {
    fn map(&mut self, _off: u64, line: &[u8], ctx: &mut MapContext<'_>) -> sluice_api::Result<()> {
        let mut dec = sluice_formats::delimited::Decoder::new(b'|');
        let f = dec.decode(line);
        f.expect_len(2)
            .map_err(|e| ApiError::bad_record(e.to_string()))?;
        let n = f.i64(1).map_err(|e| ApiError::bad_record(e.to_string()))?;
        ctx.emit(f.get(0).unwrap(), &(n as u64).to_le_bytes())
    }
}

/// [`PipeMapper`] taking blocks of lines: a block with a malformed line is
/// refused whole, before anything is emitted.
struct BlockPipeMapper(PipeMapper);

impl Mapper for BlockPipeMapper {
    fn map(&mut self, off: u64, line: &[u8], ctx: &mut MapContext<'_>) -> sluice_api::Result<()> {
        self.0.map(off, line, ctx)
    }

    fn wants_line_blocks(&self) -> bool {
        true
    }

    fn map_lines(
        &mut self,
        off: u64,
        block: &[u8],
        ctx: &mut MapContext<'_>,
    ) -> sluice_api::Result<()> {
        let lines = || block.split(|&b| b == b'\n').filter(|l| !l.is_empty());
        let well_formed = |l: &&[u8]| {
            let mut f = l.split(|&b| b == b'|');
            f.next().is_some() && f.next().is_some_and(|n| n.iter().all(u8::is_ascii_digit))
        };
        if !lines().all(|l| well_formed(&l)) {
            return Err(ApiError::bad_record("a malformed line in the block"));
        }
        lines().try_for_each(|l| self.map(off, l, ctx))
    }
}

#[test]
fn malformed_records_fail_with_file_and_offset_or_are_skipped_and_kept() {
    malformed_records_meet_the_policy(JobSpec::new("pipe", || PipeMapper));
}

/// A block the mapper refuses is mapped again line by line: the error
/// names the malformed line's own offset, and skipping keeps every good
/// line of the block exactly once.
#[test]
fn malformed_records_in_a_refused_block_meet_the_policy_line_by_line() {
    malformed_records_meet_the_policy(JobSpec::new("pipe", || BlockPipeMapper(PipeMapper)));
}

fn malformed_records_meet_the_policy(job: JobSpec) {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("rows.txt");
    std::fs::write(&input, b"a|1\nb|x\nc|3\njunk\na|4\n").unwrap();
    let job = job
        .reducer(sluice_jobs::SumReducer::output)
        .aggregator(sluice_api::SumU64);
    let out = d.path().join("out");
    let err = run(&job, &input, &out, &cfg(1, 1 << 30, 1))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("rows.txt") && err.contains("offset 4") && err.contains("not a number"),
        "{err}"
    );
    assert_no_output(&out);

    let mut c = cfg(1, 1 << 30, 1);
    c.bad_records = BadRecordPolicy::Skip;
    let r = run(&job, &input, &out, &c).unwrap();
    assert_eq!(r.counter(TaskCounter::BadRecords), 2);
    assert_eq!(
        output_lines(&out, "part-r-"),
        [b"a\t5".to_vec(), b"c\t3".to_vec()]
    );
    assert_eq!(
        output_lines(&out.join("_bad_records"), "part-m-"),
        [b"b|x".to_vec(), b"junk".to_vec()]
    );
}

#[test]
fn an_overlong_record_is_refused_naming_the_limit() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("big.txt");
    let mut bytes = b"short line\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', 3 << 20));
    std::fs::write(&input, &bytes).unwrap();
    let out = d.path().join("out");
    let mut c = cfg(2, 1 << 30, 1);
    c.max_record = 1 << 20;
    let err = run(&sluice_jobs::wordcount(Grouping::Hash), &input, &out, &c)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("big.txt") && err.contains("offset 11") && err.contains("--max-record-size"),
        "{err}"
    );
    assert_no_output(&out);
    // Within the limit the same line is one (long) word.
    c.max_record = 4 << 20;
    run(&sluice_jobs::wordcount(Grouping::Hash), &input, &out, &c).unwrap();
    assert_eq!(parse_counts(&out).len(), 3);
}

#[test]
fn binary_garbage_is_counted_as_bytes() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("garbage.bin");
    let mut x = 0x1234_5678_9abc_def0u64;
    let bytes: Vec<u8> = (0..300_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 56) as u8
        })
        .collect();
    std::fs::write(&input, &bytes).unwrap();
    let out = d.path().join("out");
    run(
        &sluice_jobs::wordcount(Grouping::Sort),
        &input,
        &out,
        &cfg(2, 1 << 30, 2),
    )
    .unwrap();
    let lines: Vec<Vec<u8>> = bytes
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l).to_vec())
        .collect();
    assert_eq!(parse_counts(&out), oracle_counts(&lines));
}

#[test]
fn user_counters_and_setup_cleanup_are_reported() {
    struct Counting;
    impl Mapper for Counting {
        fn setup(&mut self, ctx: &mut MapContext<'_>) -> sluice_api::Result<()> {
            ctx.counters().incr("app", "tasks", 1);
            Ok(())
        }
        fn map(
            &mut self,
            _o: u64,
            line: &[u8],
            ctx: &mut MapContext<'_>,
        ) -> sluice_api::Result<()> {
            ctx.counters().incr("app", "bytes", line.len() as u64);
            ctx.emit_key(line)
        }
    }
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 500_000, 100);
    let out = d.path().join("out");
    let r = run(
        &JobSpec::new("count", || Counting),
        &data,
        &out,
        &cfg(2, 1 << 30, 1),
    )
    .unwrap();
    let bytes: usize = input_lines(&data).iter().map(Vec::len).sum();
    assert_eq!(r.user_counters["app.bytes"], bytes as u64);
    assert_eq!(r.user_counters["app.tasks"], r.splits as u64);
}

#[test]
fn a_failing_reducer_fails_the_job_and_commits_nothing() {
    struct Boom;
    impl sluice_api::Reducer for Boom {
        fn reduce(
            &mut self,
            key: &[u8],
            _v: &mut dyn sluice_api::Values,
            _c: &mut sluice_api::ReduceContext<'_>,
        ) -> sluice_api::Result<()> {
            Err(ApiError::user(format!(
                "cannot reduce {}",
                String::from_utf8_lossy(key)
            )))
        }
    }
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 200_000, 100);
    let out = d.path().join("out");
    let job = JobSpec::new("boom", || sluice_jobs::WordCountMapper).reducer(|| Boom);
    let err = run(&job, &data, &out, &cfg(2, 1 << 30, 4))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("reduce failed") && err.contains("cannot reduce"),
        "{err}"
    );
    assert_no_output(&out);
}

#[test]
fn gzip_input_counts_like_plain_text() {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 1 << 20, 2000);
    let gz_dir = d.path().join("gz");
    std::fs::create_dir(&gz_dir).unwrap();
    for (i, line_chunk) in input_lines(&data).chunks(5000).enumerate() {
        let f = std::fs::File::create(gz_dir.join(format!("part-{i}.gz"))).unwrap();
        let mut enc = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        for l in line_chunk {
            enc.write_all(l).unwrap();
            enc.write_all(b"\n").unwrap();
        }
        enc.finish().unwrap();
    }
    let out = d.path().join("out");
    let r = run(
        &sluice_jobs::wordcount(Grouping::Hash),
        &gz_dir,
        &out,
        &cfg(2, 1 << 30, 2),
    )
    .unwrap();
    assert_eq!(parse_counts(&out), oracle_counts(&input_lines(&data)));
    assert_eq!(
        r.splits,
        std::fs::read_dir(&gz_dir).unwrap().count(),
        "one split per gzip file"
    );
}

#[test]
fn a_corrupt_gzip_file_fails_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("bad.gz");
    std::fs::write(&input, b"\x1f\x8b\x08\x00garbage that is not deflate").unwrap();
    let out = d.path().join("out");
    let err = run(
        &sluice_jobs::wordcount(Grouping::Hash),
        &input,
        &out,
        &cfg(1, 1 << 30, 1),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("bad.gz") && err.to_string().contains("gzip"),
        "{err}"
    );
    assert_no_output(&out);
}

/// Emits the first 10 bytes of a fixed-length record as the key.
struct KeyPrefix;

impl Mapper for KeyPrefix {
    fn map(&mut self, _off: u64, rec: &[u8], ctx: &mut MapContext<'_>) -> sluice_api::Result<()> {
        ctx.emit(&rec[..10], &rec[10..])
    }
}

#[test]
fn fixed_length_records_sort_by_key_and_truncation_fails() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("records.bin");
    let mut x = 7u64;
    let mut recs: Vec<Vec<u8>> = (0..5000)
        .map(|i| {
            let mut r = Vec::with_capacity(100);
            for _ in 0..10 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                r.push(b' ' + (x >> 58) as u8);
            }
            r.extend(format!("{i:>90}").bytes());
            r
        })
        .collect();
    std::fs::write(&input, recs.concat()).unwrap();
    let out = d.path().join("out");
    let mut c = cfg(2, 2 << 20, 1);
    c.format = sluice_formats::input::RecordFormat::Fixed(100);
    c.split_size = Some(10_000);
    let job = JobSpec::new("tera", || KeyPrefix).reducer(|| PassThrough);
    run(&job, &input, &out, &c).unwrap();
    recs.sort_by(|a, b| a[..10].cmp(&b[..10]));
    let got = std::fs::read(out.join("part-r-00000")).unwrap();
    let got: Vec<&[u8]> = got.chunks(100).collect();
    let keys: Vec<&[u8]> = got.iter().map(|r| &r[..10]).collect();
    let want: Vec<&[u8]> = recs.iter().map(|r| &r[..10]).collect();
    assert_eq!(keys, want);
    // A file that ends inside a record is refused.
    std::fs::write(&input, &recs.concat()[..4950]).unwrap();
    let out2 = d.path().join("out2");
    let err = run(&job, &input, &out2, &c).unwrap_err().to_string();
    assert!(
        err.contains("records.bin") && err.contains("truncated at offset 4900"),
        "{err}"
    );
    assert_no_output(&out2);
}

/// Writes each value after its key with no separator (binary records).
struct PassThrough;

impl sluice_api::Reducer for PassThrough {
    fn reduce(
        &mut self,
        key: &[u8],
        values: &mut dyn sluice_api::Values,
        ctx: &mut sluice_api::ReduceContext<'_>,
    ) -> sluice_api::Result<()> {
        while let Some(v) = values.next_value() {
            let rec = [key, v].concat();
            ctx.write_key(&rec[..rec.len() - 1])?;
        }
        Ok(())
    }
}

/// `sort_buffer` sets how much a map thread sorts before it spills: a
/// small one makes many runs, a large one few, and the answer is the
/// same; the report gives the buffer used.
#[test]
fn the_sort_buffer_sets_the_runs_and_not_the_answer() {
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 4 << 20, 50);
    let mut want = input_lines(&data);
    want.sort();
    let sample = sort_sample(&data);
    let mut runs = Vec::new();
    for buffer in [256 << 10, 64 << 20] {
        let mut c = cfg(2, 1 << 30, 2);
        c.split_size = Some(8 << 20);
        c.sort_buffer = Some(buffer);
        let out = d.path().join(format!("sorted-{buffer}"));
        let r = run(&sluice_jobs::sort(sample.clone(), 2), &data, &out, &c).unwrap();
        assert_eq!(output_lines(&out, "part-r-"), want);
        assert_eq!(r.sort_buffer_bytes, buffer);
        runs.push(r.spill_files);
    }
    assert!(runs[0] > 4 * runs[1], "runs {runs:?}");
}

#[test]
fn the_model_counts_the_time_before_the_engine_and_the_cache_as_the_caller_found_it() {
    let d = tempfile::tempdir().unwrap();
    let data = gen_text(d.path(), 1 << 20, 1000);
    let mut c = cfg(2, 1 << 30, 2);
    c.hardware = Some(sluice_model::Hardware::defaults("a test"));
    // Just written, the input is in the page cache; measured now, it is.
    let r = run(
        &sluice_jobs::grep("^a").unwrap(),
        &data,
        &d.path().join("a"),
        &c,
    )
    .unwrap();
    let m = r.model.unwrap();
    assert!(m.residency.input_cached > 0.9, "{:?}", m.residency);
    assert!(m.residency.output_synced);
    // A caller that sampled the input first says how much was cached
    // before, and how long it took.
    c.input_cached = Some(0.25);
    c.before_s = 30.0;
    let r = run(
        &sluice_jobs::grep("^a").unwrap(),
        &data,
        &d.path().join("b"),
        &c,
    )
    .unwrap();
    assert!(
        r.phases.setup_s >= 30.0 && r.phases.total_s >= 30.0,
        "{:?}",
        r.phases
    );
    let m = r.model.unwrap();
    assert_eq!(m.residency.input_cached, 0.25);
    assert!(m.actual_seconds >= 30.0);
}
