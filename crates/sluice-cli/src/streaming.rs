//! `sluice streaming`: Hadoop Streaming's command line, on the local engine
//! or a cluster.
//!
//! Hadoop's spellings are accepted as they are (`-input`, `-output`,
//! `-mapper`, `-combiner`, `-reducer`, `-file`, `-files`,
//! `-numReduceTasks`, `-D key=value`), and with two dashes; `--cluster DIR`
//! (or `--coordinator ADDR`) runs the job on a cluster (as the user of
//! `--user-key FILE` or `$SLUICE_USER_KEY`), whose data sets
//! `-input` and `-output` then name. Parsed by hand: clap has no
//! single-dash long options.

use std::path::PathBuf;

use anyhow::{bail, Context};
use sluice_request::{InputFormat, JobRequest, OutputFormat, StreamingParams};
use sluice_tools::conn::Conn;

use crate::summary::print_summary;

/// The job a streaming command line asks for, and where to run it.
#[derive(Debug, Default)]
struct Parsed {
    inputs: Vec<String>,
    output: Option<String>,
    params: StreamingParams,
    reducers: Option<u32>,
    properties: Vec<(String, String)>,
    cluster: Option<PathBuf>,
    coordinator: Option<String>,
    user_key: Option<PathBuf>,
    overwrite: bool,
    report: Option<PathBuf>,
    input_format: InputFormat,
    output_format: OutputFormat,
}

/// Runs `sluice streaming ARGS`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let p = parse(args)?;
    let req = request(&p)?;
    let reports = if p.cluster.is_some() || p.coordinator.is_some() {
        let mut conn = Conn::new(p.coordinator.clone(), p.cluster.clone(), None);
        conn.user_key = p.user_key.clone();
        sluice_tools::conn::submit_request(&conn, &req, 1)?
    } else {
        stop_commands_on_signals();
        sluice_tools::local::run_request(&req)?
    };
    if let Some(path) = &p.report {
        crate::run::write_report(path, &reports)?;
    }
    reports.iter().for_each(print_summary);
    Ok(())
}

fn parse(args: &[String]) -> anyhow::Result<Parsed> {
    let mut p = Parsed::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let name = flag.trim_start_matches('-');
        if name == "overwrite" {
            p.overwrite = true;
            continue;
        }
        let mut value = || {
            it.next()
                .cloned()
                .with_context(|| format!("{flag} needs a value"))
        };
        match name {
            "input" => p.inputs.push(value()?),
            "output" => p.output = Some(value()?),
            "mapper" => p.params.mapper = value()?,
            "reducer" => p.params.reducer = Some(value()?),
            "combiner" => p.params.combiner = Some(value()?),
            "file" => ship(&mut p.params, &value()?)?,
            "files" => {
                for f in value()?.split(',').filter(|f| !f.is_empty()) {
                    ship(&mut p.params, f)?;
                }
            }
            "numReduceTasks" | "reducers" => {
                let n = value()?;
                p.reducers = Some(n.parse().with_context(|| format!("{flag} {n}"))?);
            }
            "D" => {
                let kv = value()?;
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("-D {kv}: expected key=value"))?;
                p.properties.push((k.to_owned(), v.to_owned()));
            }
            "inputformat" | "input-format" => p.input_format = input_format(&value()?)?,
            "outputformat" | "output-format" => p.output_format = output_format(&value()?)?,
            "cluster" => p.cluster = Some(value()?.into()),
            "coordinator" => p.coordinator = Some(value()?),
            "user-key" => p.user_key = Some(value()?.into()),
            "report" => p.report = Some(value()?.into()),
            _ => bail!(
                "unknown option {flag}; sluice streaming takes -input, -output, -mapper, \
                 -combiner, -reducer, -file, -files, -numReduceTasks, -D key=value, \
                 -inputformat, -outputformat, --overwrite, --report FILE, --cluster DIR, \
                 --coordinator ADDR, --user-key FILE"
            ),
        }
    }
    Ok(p)
}

/// An input format by Sluice's name or the Hadoop class's (package or not):
/// `SequenceFileAsTextInputFormat`, `TextInputFormat`,
/// `AvroAsTextInputFormat`.
fn input_format(name: &str) -> anyhow::Result<InputFormat> {
    Ok(match name.rsplit('.').next().unwrap_or(name) {
        "auto" => InputFormat::Auto,
        "text" | "TextInputFormat" | "KeyValueTextInputFormat" => InputFormat::Text,
        "sequencefile" | "SequenceFileAsTextInputFormat" => InputFormat::SequenceFile,
        "avro" | "AvroAsTextInputFormat" => InputFormat::Avro,
        "parquet" => InputFormat::Parquet,
        "csv" => InputFormat::Csv,
        "jsonl" => InputFormat::Jsonl,
        _ => bail!(
            "-inputformat {name}: takes auto, text, sequencefile, avro, parquet, csv, jsonl, or Hadoop's \
             TextInputFormat, SequenceFileAsTextInputFormat, AvroAsTextInputFormat"
        ),
    })
}

/// An output format by Sluice's name or the Hadoop class's.
fn output_format(name: &str) -> anyhow::Result<OutputFormat> {
    Ok(match name.rsplit('.').next().unwrap_or(name) {
        "text" | "TextOutputFormat" => OutputFormat::Text,
        "sequencefile" | "SequenceFileOutputFormat" => OutputFormat::SequenceFile,
        "avro" => OutputFormat::Avro,
        "parquet" => OutputFormat::Parquet,
        _ => bail!(
            "-outputformat {name}: takes text, sequencefile, avro, parquet, or Hadoop's \
             TextOutputFormat, SequenceFileOutputFormat"
        ),
    })
}

/// Adds a local file to those shipped with the job.
fn ship(params: &mut StreamingParams, path: &str) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("-file {path}"))?;
    let name = std::path::Path::new(path)
        .file_name()
        .with_context(|| format!("-file {path}: not a file name"))?
        .to_string_lossy()
        .into_owned();
    params.files.push((name, bytes));
    Ok(())
}

fn request(p: &Parsed) -> anyhow::Result<JobRequest> {
    if p.inputs.is_empty() {
        bail!("sluice streaming needs -input");
    }
    let Some(output) = &p.output else {
        bail!("sluice streaming needs -output");
    };
    if p.params.mapper.is_empty() {
        bail!("sluice streaming needs -mapper");
    }
    let mut params = p.params.clone();
    if p.reducers == Some(0) {
        params.reducer = None;
    }
    let mut req = JobRequest::new("streaming", &params, &p.inputs.join(","), output);
    req.reducers = p.reducers.filter(|&n| n > 0);
    req.overwrite = p.overwrite;
    req.engine.input_format = p.input_format;
    req.engine.output_format = p.output_format;
    for (k, v) in &p.properties {
        req.properties.insert(k.clone(), v.clone());
    }
    Ok(req)
}

/// On SIGINT, SIGTERM or SIGHUP, kills the Streaming commands this
/// process runs (each runs in a process group of its own, which a
/// terminal's Ctrl-C, `sluice cluster down`'s SIGTERM to a worker and
/// YARN's kill of a container's process group do not reach) before this
/// process ends as the signal would end it. Nothing is committed: a job's
/// output is committed only when it ends well. A worker with
/// `--task-user` also removes the directory its commands' working
/// directories were in. For a local job and for a worker.
pub(crate) fn stop_commands_on_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                sluice_jobs::streaming::stop_all();
                sluice_jobs::cell::remove_base();
                let _ = signal_hook::low_level::emulate_default_handler(sig);
                std::process::exit(128 + sig);
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn hadoop_spellings_parse() {
        let p = parse(&args(
            "-input a -input b --output o -mapper cat -reducer NONE -numReduceTasks 3 \
             -D stream.num.map.output.key.fields=2 --cluster cl",
        ))
        .unwrap();
        assert_eq!(p.inputs, ["a", "b"]);
        assert_eq!(p.reducers, Some(3));
        assert_eq!(p.properties[0].1, "2");
        let req = request(&p).unwrap();
        assert_eq!(req.input, "a,b");
        assert!(parse(&args("-bogus x")).is_err());
        assert!(request(&parse(&args("-input a -output o")).unwrap()).is_err());
    }

    #[test]
    fn input_and_output_formats_by_hadoops_class_names() {
        let p = parse(&args(
            "-input a -output o -mapper cat \
             -inputformat org.apache.hadoop.mapred.SequenceFileAsTextInputFormat \
             -outputformat org.apache.hadoop.mapred.SequenceFileOutputFormat",
        ))
        .unwrap();
        let req = request(&p).unwrap();
        assert_eq!(req.engine.input_format, InputFormat::SequenceFile);
        assert_eq!(req.engine.output_format, OutputFormat::SequenceFile);
        let p = parse(&args("-inputformat AvroAsTextInputFormat")).unwrap();
        assert_eq!(p.input_format, InputFormat::Avro);
        assert!(parse(&args("-inputformat NLineInputFormat")).is_err());
        let p = parse(&args("-outputformat parquet")).unwrap();
        assert_eq!(p.output_format, OutputFormat::Parquet);
    }
}
