//! A strict parser of the Prometheus text exposition format (0.0.4), written for the
//! tests so the listener's output is checked by code that does not share its writer.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

#[derive(Debug, Default)]
pub struct Family {
    pub help: String,
    pub kind: String,
    pub samples: Vec<Sample>,
}

fn is_name(s: &str, colons: bool) -> bool {
    let mut c = s.chars();
    let first_ok = |ch: char| ch.is_ascii_alphabetic() || ch == '_' || (colons && ch == ':');
    c.next().is_some_and(first_ok)
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || (colons && ch == ':'))
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ if s.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c)) && !s.is_empty() => {
            s.parse().map_err(|_| format!("bad value {s:?}"))
        }
        _ => Err(format!("bad value {s:?}")),
    }
}

/// Parses `{a="x",b="y"}` (the braces included) and returns the pairs and the rest.
type LabelsAndRest<'a> = (Vec<(String, String)>, &'a str);

fn parse_labels(s: &str) -> Result<LabelsAndRest<'_>, String> {
    let mut rest = s.strip_prefix('{').ok_or("expected {")?;
    let mut out = Vec::new();
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((out, r));
        }
        let eq = rest.find('=').ok_or("label without =")?;
        let name = &rest[..eq];
        if !is_name(name, false) || name.starts_with("__") {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("unterminated label value".into()),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                Some((_, '\n')) => return Err("raw newline in a label value".into()),
                Some((_, c)) => value.push(c),
            }
        };
        if out.iter().any(|(k, _): &(String, String)| k == name) {
            return Err(format!("label {name} twice"));
        }
        out.push((name.to_string(), value));
        rest = &rest[end + 1..];
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
            if rest.starts_with('}') {
                return Err("trailing comma".into());
            }
        } else if !rest.starts_with('}') {
            return Err("expected , or }".into());
        }
    }
}

fn family_of<'a>(sample: &str, families: &'a BTreeMap<String, Family>) -> Option<&'a str> {
    if let Some((k, f)) = families.get_key_value(sample)
        && f.kind != "histogram"
    {
        return Some(k);
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = sample.strip_suffix(suffix)
            && let Some((k, f)) = families.get_key_value(base)
            && f.kind == "histogram"
        {
            return Some(k);
        }
    }
    None
}

/// Parses a whole exposition. Every sample line must match the grammar and belong to a
/// family whose HELP and TYPE came before it; a family's samples are contiguous;
/// histograms are checked for monotone buckets ending in `+Inf` equal to `_count`.
pub fn parse(text: &str) -> Result<BTreeMap<String, Family>, String> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut closed: Vec<String> = Vec::new();
    if !text.ends_with('\n') {
        return Err("the exposition must end with a newline".into());
    }
    for (n, line) in text.lines().enumerate() {
        let err = |m: String| format!("line {}: {m}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (word, name, tail) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
            let name = name.ok_or_else(|| err("comment without a metric name".into()))?;
            if !is_name(name, true) {
                return Err(err("bad metric name".into()));
            }
            match word {
                Some("HELP") => {
                    if families.contains_key(name) {
                        return Err(err("second HELP for a metric".into()));
                    }
                    if let Some(c) = current.replace(name.to_string()) {
                        closed.push(c);
                    }
                    families.insert(
                        name.to_string(),
                        Family {
                            help: tail.to_string(),
                            ..Family::default()
                        },
                    );
                }
                Some("TYPE") => {
                    let f = families
                        .get_mut(name)
                        .filter(|_| current.as_deref() == Some(name))
                        .ok_or_else(|| err("TYPE without its HELP just before".into()))?;
                    if !f.kind.is_empty() || !f.samples.is_empty() {
                        return Err(err("TYPE after samples or twice".into()));
                    }
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&tail) {
                        return Err(err("unknown TYPE".into()));
                    }
                    f.kind = tail.to_string();
                }
                _ => return Err(err("only HELP and TYPE comments are expected".into())),
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            return Err(err("blank or stray comment line".into()));
        }
        let name_end = line
            .find(['{', ' '])
            .ok_or_else(|| err("no value".into()))?;
        let name = &line[..name_end];
        if !is_name(name, true) {
            return Err(err("bad metric name".into()));
        }
        let (labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end..]).map_err(err)?
        } else {
            (Vec::new(), &line[name_end..])
        };
        let value = rest
            .strip_prefix(' ')
            .ok_or_else(|| err("one space before the value".into()))?;
        if value.contains(' ') {
            return Err(err("timestamps or extra fields are not expected".into()));
        }
        let value = parse_value(value).map_err(err)?;
        let fam = family_of(name, &families)
            .ok_or_else(|| err("sample before its HELP/TYPE".into()))?
            .to_string();
        if closed.contains(&fam) || current.as_deref() != Some(fam.as_str()) {
            return Err(err("a family's samples are not contiguous".into()));
        }
        let f = families.get_mut(&fam).unwrap();
        if f.kind.is_empty() {
            return Err(err("sample before TYPE".into()));
        }
        if f.kind == "counter" && (value.is_nan() || value < 0.0) {
            return Err(err("negative counter".into()));
        }
        f.samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    for (name, f) in &families {
        if f.kind == "histogram" {
            check_histogram(name, f)?;
        }
    }
    Ok(families)
}

fn check_histogram(name: &str, f: &Family) -> Result<(), String> {
    type Key = Vec<(String, String)>;
    let mut buckets: BTreeMap<Key, Vec<(f64, f64)>> = BTreeMap::new();
    let mut counts: BTreeMap<Key, f64> = BTreeMap::new();
    let mut sums: BTreeMap<Key, f64> = BTreeMap::new();
    for s in &f.samples {
        let mut key: Key = s
            .labels
            .iter()
            .filter(|(k, _)| k != "le")
            .cloned()
            .collect();
        key.sort();
        if s.name.ends_with("_bucket") {
            let le = s
                .labels
                .iter()
                .find(|(k, _)| k == "le")
                .ok_or(format!("{name}: bucket without le"))?;
            buckets
                .entry(key)
                .or_default()
                .push((parse_value(&le.1)?, s.value));
        } else if s.name.ends_with("_count") {
            counts.insert(key, s.value);
        } else {
            sums.insert(key, s.value);
        }
    }
    if buckets.is_empty() && !f.samples.is_empty() {
        return Err(format!("{name}: a histogram without buckets"));
    }
    for (key, bs) in &buckets {
        for w in bs.windows(2) {
            if w[0].0.partial_cmp(&w[1].0) != Some(std::cmp::Ordering::Less) || w[1].1 < w[0].1 {
                return Err(format!(
                    "{name}{key:?}: buckets not increasing in le and count: {bs:?}"
                ));
            }
        }
        let last = bs.last().unwrap();
        if last.0 != f64::INFINITY {
            return Err(format!("{name}{key:?}: last bucket is not le=\"+Inf\""));
        }
        if counts.get(key) != Some(&last.1) {
            return Err(format!(
                "{name}{key:?}: _count differs from the +Inf bucket"
            ));
        }
        if !sums.contains_key(key) {
            return Err(format!("{name}{key:?}: no _sum"));
        }
    }
    Ok(())
}

#[test]
fn the_parser_refuses_what_it_should() {
    let ok = "# HELP a x\n# TYPE a counter\na{l=\"q\\\"\\n\\\\\"} 1\n";
    let f = parse(ok).unwrap();
    assert_eq!(f["a"].samples[0].labels[0].1, "q\"\n\\");
    for bad in [
        "a 1\n",
        "# HELP a x\na 1\n",
        "# HELP a x\n# TYPE a counter\na{l=\"x\\q\"} 1\n",
        "# HELP a x\n# TYPE a counter\na -1\n",
        "# HELP a x\n# TYPE a gauge\na{l=\"x\"}  1\n",
        "# HELP a x\n# TYPE a gauge\n# HELP b y\n# TYPE b gauge\nb 1\na 1\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
        "# HELP a x\n# TYPE a gauge\na 1",
    ] {
        assert!(parse(bad).is_err(), "accepted {bad:?}");
    }
}
