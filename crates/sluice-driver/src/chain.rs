//! A chain of jobs ([`Plan::Chain`](sluice_request::Plan::Chain)): its
//! stages run one after another through temporaries, each stage's
//! [`StageRef`]s resolved to the outputs and counters of the stages before.

use sluice_request::{JobRequest, Registry, StageRef, CACHE_ADMIT_PROPERTY};

use crate::error::DriverError;
use crate::props::{set_default, to_temporary};
use crate::report::JobReport;
use crate::target::{one, Target};
use crate::{cluster, local};

/// Runs the stages of a chain through temporaries named by the target,
/// removed afterwards whatever happened. A stage its kind skips runs
/// nothing: `@N` references to it, output or counters, are its
/// predecessor's.
pub(crate) fn chain(
    jobs: &Registry,
    stages: Vec<JobRequest>,
    target: Target<'_>,
) -> Result<Vec<JobReport>, DriverError> {
    let Some(last) = stages.last() else {
        return Ok(Vec::new());
    };
    let temps: Vec<String> = match target {
        Target::Local(_) => local::temp_outputs(&last.output, stages.len())?,
        Target::Cluster(_) => cluster::temp_outputs(stages.len()),
    };
    let reads = input_reads(&stages);
    let mut reports = Vec::new();
    let mut run_all = || -> Result<(), DriverError> {
        // Each stage's output, and the index of its report.
        let mut outputs = temps.clone();
        let mut report_of: Vec<usize> = Vec::new();
        for (n, mut stage) in stages.clone().into_iter().enumerate() {
            if reads_once(&stage.input, &reads, &report_of, &outputs, &temps) {
                set_default(&mut stage, CACHE_ADMIT_PROPERTY, "false");
            }
            stage.input = resolve_refs(&stage.input, &outputs)?;
            let done: Vec<&JobReport> = report_of.iter().map(|&r| &reports[r]).collect();
            resolve_param_refs(&mut stage.params, &outputs, &done)?;
            let kind = jobs.get(&stage.job)?;
            if n > 0 && kind.skip(&stage)? {
                outputs[n] = outputs[n - 1].clone();
                report_of.push(report_of[n - 1]);
                continue;
            }
            if stage.output.is_empty() {
                to_temporary(&mut stage, &temps[n]);
            }
            outputs[n] = stage.output.clone();
            let plan = kind.plan(&stage)?;
            reports.push(one(jobs, stage, plan, target)?);
            report_of.push(reports.len() - 1);
        }
        Ok(())
    };
    let done = run_all();
    match target {
        Target::Local(_) => local::remove_temps(&temps),
        Target::Cluster(t) => t.remove_temps(&temps),
    }
    done.map(|()| reports)
}

/// How many times the stages name each stage's output as an input item
/// (`@N`; an input naming it twice reads it twice; side inputs are read
/// from the block store, not through the caches).
fn input_reads(stages: &[JobRequest]) -> Vec<usize> {
    let mut reads = vec![0; stages.len()];
    for s in stages {
        for n in s.input.split(',').filter_map(output_ref) {
            if let Some(r) = reads.get_mut(n) {
                *r += 1;
            }
        }
    }
    reads
}

/// The stage whose output an input item names, if it is `@N`.
fn output_ref(item: &str) -> Option<usize> {
    let r: StageRef = item.parse().ok()?;
    r.counter_key().is_none().then(|| r.stage())
}

/// Whether a stage's `input` is only temporaries that no other stage
/// reads as input: its maps then read them without admitting them to the
/// block caches ([`CACHE_ADMIT_PROPERTY`]): a chain's stage output read
/// once by the next stage, cached, would hold memory never read again.
/// A stage its kind skipped shares its predecessor's output, so the
/// reads of a data set are those of every stage that names it; `report_of`
/// tells, for each stage run or skipped so far, which report (hence which
/// stage's run) its output is.
fn reads_once(
    input: &str,
    reads: &[usize],
    report_of: &[usize],
    outputs: &[String],
    temps: &[String],
) -> bool {
    input.split(',').all(|item| {
        let Some(k) = output_ref(item) else {
            return false;
        };
        let (Some(&run), Some(out)) = (report_of.get(k), outputs.get(k)) else {
            return false;
        };
        let total: usize = report_of
            .iter()
            .zip(reads)
            .filter(|(r, _)| **r == run)
            .map(|(_, n)| n)
            .sum();
        total == 1 && temps.contains(out)
    })
}

/// The string parameters that are stage references ([`StageRef`]), at
/// any depth: `@N` (a side input naming stage N's output) replaced by
/// temporary N, and `@N:GROUP.NAME` by the value of stage N's user
/// counter `GROUP.NAME` (0 if it never counted). Other strings are text.
fn resolve_param_refs(
    v: &mut serde_json::Value,
    temps: &[String],
    done: &[&JobReport],
) -> Result<(), DriverError> {
    match v {
        serde_json::Value::String(s) => {
            if let Ok(r) = s.parse::<StageRef>() {
                *v = resolve_param(&r, temps, done)?;
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                resolve_param_refs(item, temps, done)?;
            }
        }
        serde_json::Value::Object(fields) => {
            for item in fields.values_mut() {
                resolve_param_refs(item, temps, done)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The value a parameter reference stands for: an output's name or a
/// counter's value.
fn resolve_param(
    r: &StageRef,
    temps: &[String],
    done: &[&JobReport],
) -> Result<serde_json::Value, DriverError> {
    let Some(key) = r.counter_key() else {
        return output_of(r, temps).map(serde_json::Value::from);
    };
    let report = done
        .get(r.stage())
        .ok_or_else(|| DriverError::Plan(format!("{r}: stage {} has not run", r.stage())))?;
    Ok(report.user_counters.get(&key).copied().unwrap_or(0).into())
}

/// The output a reference names.
fn output_of(r: &StageRef, temps: &[String]) -> Result<String, DriverError> {
    temps
        .get(r.stage())
        .cloned()
        .ok_or_else(|| DriverError::Plan(format!("no stage output {r}")))
}

/// `input` with each item `@N` replaced by temporary N; an item that
/// starts with `@` and is not `@N` is an error.
fn resolve_refs(input: &str, temps: &[String]) -> Result<String, DriverError> {
    input
        .split(',')
        .map(|item| {
            if !item.starts_with('@') {
                return Ok(item.to_owned());
            }
            let r: StageRef = item.parse()?;
            match r.counter_key() {
                None => output_of(&r, temps),
                Some(_) => Err(DriverError::Plan(format!("no stage output {item}"))),
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|v| v.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stages(inputs: &[&str]) -> Vec<JobRequest> {
        inputs
            .iter()
            .map(|i| JobRequest {
                input: (*i).to_owned(),
                ..JobRequest::new("wordcount", &serde_json::Value::Null, "", "")
            })
            .collect()
    }

    /// A temporary read as input by one stage alone is read once; one
    /// read by two, the user's input, a mixed input, or an output that
    /// is not a temporary is not; a skipped stage's readers read its
    /// predecessor's output.
    #[test]
    fn a_temporary_named_by_one_stage_alone_is_read_once() {
        let s = stages(&["data", "@0", "@1", "@1", "@3,data", "@4", "@5", "@6,@6"]);
        let reads = input_reads(&s);
        assert_eq!(reads, [1, 2, 0, 1, 1, 1, 2, 0]);
        let temps: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
        let once = |n: usize, report_of: &[usize]| {
            reads_once(&s[n].input, &reads, report_of, &temps, &temps)
        };
        assert!(!once(0, &[]), "the user's input");
        assert!(once(1, &[0]));
        assert!(!once(2, &[0, 1]), "@1 is read twice");
        assert!(!once(4, &[0, 1, 2, 3]), "mixed with the user's data");
        assert!(once(5, &[0, 1, 2, 3, 4]));
        // Stage 5 skipped: 6 reads stage 4's output, which 5 named too.
        assert!(!once(6, &[0, 1, 2, 3, 4, 4]));
        assert!(!once(7, &[0, 1, 2, 3, 4, 5, 6]), "@6 named twice");
        // Not a temporary (a stage writing the user's output).
        let outputs: Vec<String> = (0..8).map(|i| format!("out{i}")).collect();
        assert!(!reads_once("@0", &reads, &[0], &outputs, &temps));
    }

    fn report(counters: &[(&str, u64)]) -> JobReport {
        JobReport {
            target: "local",
            job: String::new(),
            input: String::new(),
            output: String::new(),
            maps: 0,
            input_pieces: 0,
            reducers: 1,
            input_bytes: 0,
            output_records: 0,
            output_bytes: 0,
            shuffle_bytes: 0,
            task_memory_bytes: 0,
            phases: crate::report::Phases::default(),
            counters: Default::default(),
            user_counters: counters
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
            local: None,
            cluster: None,
        }
    }

    /// Parameters that are stage references become outputs and counter
    /// values; other strings, `@+1` among them, stay text. An input item
    /// that starts with `@` must be `@N`.
    #[test]
    fn references_resolve_by_the_one_grammar() {
        let temps = ["t0".to_owned(), "t1".to_owned()];
        let first = report(&[("G.N", 5)]);
        let mut p = serde_json::json!({
            "side": "@1", "moved": "@0:G.N", "none": "@0:G.M",
            "text": ["@+1", "@01", "@1:", "@", "plain"],
        });
        resolve_param_refs(&mut p, &temps, &[&first]).unwrap();
        assert_eq!(
            p,
            serde_json::json!({
                "side": "t1", "moved": 5, "none": 0,
                "text": ["@+1", "@01", "@1:", "@", "plain"],
            })
        );
        let mut late = serde_json::json!("@1:G.N");
        assert!(resolve_param_refs(&mut late, &temps, &[&first]).is_err());
        assert_eq!(resolve_refs("data,@1,@0", &temps).unwrap(), "data,t1,t0");
        for bad in ["@+1", "@2", "@0:G.N", "@"] {
            assert!(resolve_refs(bad, &temps).is_err(), "{bad}");
        }
        assert_eq!(input_reads(&stages(&["@+1", "@0,@0:G.N"])), [1, 0]);
    }
}
