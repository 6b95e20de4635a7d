//! The Prometheus text exposition format (version 0.0.4): `# HELP` and `# TYPE` before
//! each family's samples, escaped label values, histograms as cumulative `_bucket`
//! series ending in `le="+Inf"` plus `_sum` and `_count`.

use super::{Family, Kind, Labels, Series};
use std::collections::BTreeMap;
use std::fmt::Write;

/// HELP text escapes backslash and newline.
fn escape_help(s: &str) -> String {
    s.replace('\\', r"\\").replace('\n', r"\n")
}

/// Label values also escape the double quote.
pub(crate) fn escape_label(s: &str) -> String {
    s.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// A sample value: integers without a fraction, `+Inf`/`-Inf`/`NaN` as Prometheus
/// spells them.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

fn label_set(labels: &Labels, extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{}\"", escape_label(v)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

pub(crate) fn render(families: &BTreeMap<&'static str, Family>) -> String {
    let mut out = String::new();
    for (name, fam) in families {
        let kind = match fam.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let _ = writeln!(out, "# HELP {name} {}", escape_help(fam.help));
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, series) in &fam.series {
            match series {
                Series::Scalar(v) => {
                    let _ = writeln!(out, "{name}{} {}", label_set(labels, None), number(*v));
                }
                Series::Histogram(h) => {
                    let mut cumulative = 0u64;
                    for (bound, n) in fam.buckets.iter().zip(&h.counts) {
                        cumulative += n;
                        let le = number(*bound);
                        let _ = writeln!(
                            out,
                            "{name}_bucket{} {cumulative}",
                            label_set(labels, Some(("le", &le)))
                        );
                    }
                    let _ = writeln!(
                        out,
                        "{name}_bucket{} {}",
                        label_set(labels, Some(("le", "+Inf"))),
                        cumulative + h.over
                    );
                    let _ = writeln!(
                        out,
                        "{name}_sum{} {}",
                        label_set(labels, None),
                        number(h.sum)
                    );
                    let _ = writeln!(out, "{name}_count{} {}", label_set(labels, None), h.count);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;

    #[test]
    fn escapes_and_histograms() {
        let m = Metrics::new();
        m.runner_failed("p", "exit \"2\"\nthen \\ gone");
        m.queue_to_start("p", 3.0);
        m.queue_to_start("p", 1000.0);
        let text = m.render();
        assert!(
            text.contains(r#"runner_manager_runner_failures_total{profile="p",reason="exit \"2\"\nthen \\ gone"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"runner_manager_queue_to_start_seconds_bucket{profile="p",le="2"} 0"#)
        );
        assert!(
            text.contains(r#"runner_manager_queue_to_start_seconds_bucket{profile="p",le="5"} 1"#)
        );
        assert!(
            text.contains(
                r#"runner_manager_queue_to_start_seconds_bucket{profile="p",le="+Inf"} 2"#
            )
        );
        assert!(text.contains("runner_manager_queue_to_start_seconds_sum{profile=\"p\"} 1003\n"));
        assert!(text.contains("runner_manager_queue_to_start_seconds_count{profile=\"p\"} 2\n"));
        assert!(text.contains("# TYPE runner_manager_queue_to_start_seconds histogram\n"));
    }
}
