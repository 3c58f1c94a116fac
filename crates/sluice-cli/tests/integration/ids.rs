//! Job ids as people read and type them: `sluice jobs` lists `job-1-N`,
//! `history` and `kill` take that form or the plain number printed
//! before, and refuse anything else with a clear error. Names programs
//! read back (output blocks) keep the number.

use sluice_proto::ids::JobId;

use crate::support::*;

#[test]
fn job_ids_are_listed_and_taken_as_job_epoch_n_or_the_old_number() {
    let d = tempfile::tempdir().unwrap();
    let data = gen(d.path(), "1MB");
    let c = Cluster::up(d.path(), 1, "");
    put(&c, &data, "words", "1MB", "1");
    ok(submit_wc(&c, "words", "counts").output().unwrap());
    let out = ok(c.cmd(&["jobs"]).output().unwrap());
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    let id = listed.split_whitespace().next().unwrap().to_owned();
    assert_eq!(id, "job-1-1", "{listed}");
    let job: JobId = id.parse().unwrap();

    let by_text = ok(c.cmd(&["history", &id]).output().unwrap()).stdout;
    let by_number = ok(c.cmd(&["history", &job.0.to_string()]).output().unwrap()).stdout;
    assert_eq!(by_text, by_number);
    let report: serde_json::Value = serde_json::from_slice(&by_text).unwrap();
    assert_eq!(report["job_id"], "job-1-1");

    // Output blocks keep their names, `j<the id's number>-...`, which
    // workers read their job back from.
    let blocks = ok(c.cmd(&["ls", "counts"]).output().unwrap()).stdout;
    let blocks = String::from_utf8_lossy(&blocks).into_owned();
    let names: Vec<&str> = blocks
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(!names.is_empty(), "{blocks}");
    for name in names {
        assert_eq!(
            sluice_proto::ids::output_block_job(name),
            Some(job),
            "{name}"
        );
    }

    let over = fails(c.cmd(&["kill", &id]).output().unwrap());
    assert!(over.contains("job-1-1 is not running"), "{over}");
    for bad in ["job-1", "1-1", "job-1-1-1", "Job-1-1"] {
        let err = fails(c.cmd(&["kill", bad]).output().unwrap());
        assert!(err.contains("invalid job id"), "{bad}: {err}");
        let err = fails(c.cmd(&["history", bad]).output().unwrap());
        assert!(err.contains("invalid job id"), "{bad}: {err}");
    }
}
