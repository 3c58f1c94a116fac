//! HTML and SVG for the web pages, rendered on the server: no script, no
//! asset fetched from anywhere, so a page works offline and in any
//! browser, and a test reads it from the DOM as it is served.

use std::collections::BTreeMap;
use std::fmt::Write;

use sluice_proto::report::AttemptSpan;

/// `s` with HTML's special characters escaped (text and attribute values).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `s` escaped for a URL's path segment.
pub fn url_seg(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}\
header{background:#1f3a5f;color:#fff;padding:8px 16px}header a{color:#fff;margin-right:14px;text-decoration:none}\
header b{margin-right:24px}main{padding:12px 16px}table{border-collapse:collapse;margin:8px 0 16px}\
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}\
td.n{text-align:right;font-variant-numeric:tabular-nums}.succeeded{color:#2a7a2a}.failed{color:#b00020}\
.killed{color:#777}.running{color:#1f5fa8}.err{color:#b00020;white-space:pre-wrap}\
h2{font-size:16px;margin:18px 0 4px}svg{font:11px system-ui,sans-serif}.muted{color:#777}";

/// A whole page: the navigation, `title`, `body`; refreshed every two
/// seconds while `live` (a job runs).
pub fn layout(title: &str, body: &str, live: bool) -> String {
    let refresh = if live {
        "<meta http-equiv=\"refresh\" content=\"2\">"
    } else {
        ""
    };
    // A cluster that runs --insecure says so on every page.
    let insecure = if sluice_proto::tls::insecure() {
        "<p id=\"insecure\"><b>Insecure:</b> this cluster runs --insecure: no TLS, \
         every connection in plaintext (for measurement only).</p>"
    } else {
        ""
    };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">{refresh}\
         <title>{t} · Sluice</title><style>{STYLE}</style></head><body>\
         <header><b>Sluice</b><a href=\"/\">Jobs</a><a href=\"/workers\">Workers</a>\
         <a href=\"/datasets\">Data sets</a><a href=\"/cache\">Cache</a><a href=\"/pools\">Pools</a>\
         <a href=\"/metrics\">Metrics</a></header>{insecure}<main><h1>{t}</h1>{body}</main></body></html>",
        t = esc(title)
    )
}

/// A table of `head` columns and `rows` of already escaped cells; a cell
/// starting with `#` is a number (right-aligned, the `#` dropped).
pub fn table(id: &str, head: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!("<table id=\"{id}\">");
    if head.iter().any(|h| !h.is_empty()) {
        s.push_str("<thead><tr>");
        for h in head {
            let _ = write!(s, "<th>{}</th>", esc(h));
        }
        s.push_str("</tr></thead>");
    }
    s.push_str("<tbody>");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            match c.strip_prefix('#') {
                Some(n) => {
                    let _ = write!(s, "<td class=\"n\">{n}</td>");
                }
                None => {
                    let _ = write!(s, "<td>{c}</td>");
                }
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// Bytes in binary units.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A state as a coloured word.
pub fn state(s: &str) -> String {
    format!("<span class=\"{0}\">{0}</span>", esc(s))
}

/// The fill of an attempt's bar: maps blue, reduces green while they run
/// or won; failed red, lost orange, killed grey whatever their kind.
fn fill(span: &AttemptSpan) -> &'static str {
    let map = span.task.starts_with('m');
    match span.outcome.as_str() {
        "failed" => "#e15759",
        "lost" => "#f28e2b",
        "killed" => "#bab0ac",
        "running" if map => "#a0c4e8",
        "running" => "#a8d5a0",
        _ if map => "#4e79a7",
        _ => "#59a14f",
    }
}

/// The rows of a timeline: each worker's attempts laid into as few lanes
/// (slots) as never overlap, first fit in start order. Returns, per
/// worker in name order, its lanes of span indexes.
pub fn lanes(spans: &[AttemptSpan]) -> BTreeMap<&str, Vec<Vec<usize>>> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by(|&a, &b| spans[a].start_s.total_cmp(&spans[b].start_s));
    let mut out: BTreeMap<&str, Vec<Vec<usize>>> = BTreeMap::new();
    for i in order {
        let s = &spans[i];
        let lanes = out.entry(s.worker.as_str()).or_default();
        let free = lanes
            .iter_mut()
            .find(|l| l.last().is_none_or(|&j| spans[j].end_s <= s.start_s + 1e-9));
        match free {
            Some(l) => l.push(i),
            None => lanes.push(vec![i]),
        }
    }
    out
}

/// The task timeline as SVG: one row per worker slot, one bar per attempt
/// (`rect.attempt`), coloured by kind and outcome, a speculative backup
/// outlined with dashes; each bar's title says what it was.
pub fn timeline(spans: &[AttemptSpan], total_s: f64) -> String {
    const LABEL: f64 = 150.0;
    const WIDTH: f64 = 900.0;
    const ROW: f64 = 18.0;
    let rows = lanes(spans);
    let n_rows: usize = rows.values().map(Vec::len).sum();
    let end = spans
        .iter()
        .map(|s| s.end_s)
        .fold(total_s, f64::max)
        .max(1e-3);
    let scale = (WIDTH - LABEL - 10.0) / end;
    let height = n_rows as f64 * ROW + 24.0;
    let mut s = format!(
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" \
         height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\">"
    );
    let mut y = 0.0;
    for (worker, lanes) in &rows {
        for (k, lane) in lanes.iter().enumerate() {
            let _ = write!(
                s,
                "<text x=\"0\" y=\"{}\">{} · slot {k}</text>",
                y + 13.0,
                esc(short(worker))
            );
            for &i in lane {
                bar(
                    &mut s,
                    &spans[i],
                    LABEL + spans[i].start_s * scale,
                    y,
                    scale,
                );
            }
            y += ROW;
        }
    }
    for t in ticks(end) {
        let x = LABEL + t * scale;
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"0\" x2=\"{x:.1}\" y2=\"{y}\" stroke=\"#ddd\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}s</text>",
            y + 14.0,
            seconds(t)
        );
    }
    s.push_str("</svg>");
    s
}

fn bar(s: &mut String, a: &AttemptSpan, x: f64, y: f64, scale: f64) {
    let w = ((a.end_s - a.start_s) * scale).max(1.5);
    let dash = if a.speculative {
        " stroke=\"#000\" stroke-dasharray=\"3 2\""
    } else {
        ""
    };
    let level = if a.level.is_empty() {
        String::new()
    } else {
        format!(", {}", a.level)
    };
    let _ = write!(
        s,
        "<rect class=\"attempt\" data-task=\"{task}\" data-attempt=\"{n}\" data-outcome=\"{o}\" \
         data-speculative=\"{sp}\" x=\"{x:.1}\" y=\"{y1:.1}\" width=\"{w:.1}\" height=\"14\" \
         fill=\"{f}\"{dash}><title>{task} attempt {n} on {wk}: {a0:.2}-{a1:.2} s, {o}{sps}{level}</title></rect>",
        task = esc(&a.task),
        n = a.attempt,
        o = esc(&a.outcome),
        sp = a.speculative,
        y1 = y + 2.0,
        f = fill(a),
        wk = esc(&a.worker),
        a0 = a.start_s,
        a1 = a.end_s,
        sps = if a.speculative { ", speculative" } else { "" },
        level = esc(&level),
    );
}

/// Seconds without trailing zeros: `0.35`, `2`.
fn seconds(t: f64) -> String {
    let s = format!("{t:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A worker's uid shortened for a row label.
fn short(uid: &str) -> &str {
    uid.get(..12).unwrap_or(uid)
}

/// Round tick marks for an axis from 0 to `end` seconds (at most ~10).
fn ticks(end: f64) -> Vec<f64> {
    let raw = end / 8.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    (0..)
        .map(|i| i as f64 * step)
        .take_while(|t| *t <= end + 1e-9)
        .collect()
}

/// One line of a chart: its name, its colour, its points as (seconds
/// ago, value).
pub type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

/// A line chart of `series` over `ylabel`, as SVG: what a worker's CPU
/// and network did.
pub fn chart(id: &str, ylabel: &str, series: &[Series<'_>]) -> String {
    const W: f64 = 420.0;
    const H: f64 = 110.0;
    let max = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|q| q.1))
        .fold(0.0, f64::max)
        .max(1e-9);
    let span = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|q| q.0))
        .fold(0.0, f64::max)
        .max(1.0);
    let mut s = format!(
        "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{}\" \
         viewBox=\"0 -16 {W} {}\"><rect x=\"0\" y=\"0\" width=\"{W}\" height=\"{H}\" \
         fill=\"#fafafa\" stroke=\"#ddd\"/>",
        H + 32.0,
        H + 32.0
    );
    for (i, (name, colour, points)) in series.iter().enumerate() {
        let path: Vec<String> = points
            .iter()
            .map(|(ago, v)| format!("{:.1},{:.1}", W - ago / span * W, H - v / max * (H - 4.0)))
            .collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"{colour}\">{}</text>",
            path.join(" "),
            4 + i * 110,
            H + 13.0,
            esc(name)
        );
    }
    let _ = write!(
        s,
        "<text x=\"4\" y=\"-4\">max {} · last {:.0} s</text></svg>",
        esc(&ylabel.replace("{}", &format!("{max:.2}"))),
        span
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(worker: &str, task: &str, start_s: f64, end_s: f64) -> AttemptSpan {
        AttemptSpan {
            task: task.into(),
            worker: worker.into(),
            start_s,
            end_s,
            outcome: "succeeded".into(),
            ..AttemptSpan::default()
        }
    }

    #[test]
    fn attempts_share_a_slot_row_only_when_they_do_not_overlap() {
        let spans = [
            span("a", "m00000", 0.0, 1.0),
            span("a", "m00001", 0.5, 2.0),
            span("a", "m00002", 1.0, 1.5),
            span("b", "r00000", 0.0, 3.0),
        ];
        let l = lanes(&spans);
        assert_eq!(l["a"], vec![vec![0, 2], vec![1]]);
        assert_eq!(l["b"], vec![vec![3]]);
        let svg = timeline(&spans, 3.0);
        assert_eq!(svg.matches("<rect class=\"attempt\"").count(), 4);
        assert_eq!(svg.matches("· slot").count(), 3);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(url_seg("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.35).len(), 8);
    }
}
