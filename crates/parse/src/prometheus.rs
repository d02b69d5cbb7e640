//! Prometheus' text exposition format (what a server's `/metrics` answers), and the arithmetic a
//! window needs on it: a counter's or a histogram's difference between two scrapes, and a
//! histogram's percentiles interpolated within its buckets, as `histogram_quantile` does.
//! Several scrapes in one file are told apart by `# sp-scrape <unix s>` lines (the
//! `serving_window` runner writes them); a file without them is one scrape.

use crate::Format;
use std::collections::BTreeMap;
use system_profile_model::metrics::{Bucket, LatencyQuantiles};
use system_profile_model::{Diag, Parsed};

/// One sample line: its metric name, its labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// One scrape: when it was taken (where the file says) and its samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    pub at_unix_s: Option<f64>,
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// The sum of a metric's samples over every label set whose labels include `with`; `None`
    /// when no sample has that name.
    pub fn sum(&self, name: &str, with: &[(&str, &str)]) -> Option<f64> {
        let mut found = None;
        for s in self.samples.iter().filter(|s| s.name == name) {
            if with
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            {
                *found.get_or_insert(0.0) += s.value;
            }
        }
        found
    }

    /// A counter's values by one label (`finished_reason` → count).
    pub fn by_label(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for s in self.samples.iter().filter(|s| s.name == name) {
            if let Some(v) = s.labels.get(label) {
                *out.entry(v.clone()).or_insert(0.0) += s.value;
            }
        }
        out
    }

    /// A histogram's cumulative buckets (`le` → count), summed over its other labels.
    pub fn buckets(&self, histogram: &str) -> Vec<(f64, f64)> {
        let mut by_le: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        let bucket = format!("{histogram}_bucket");
        for s in self.samples.iter().filter(|s| s.name == bucket) {
            let Some(le) = s.labels.get("le").and_then(|l| parse_value(l)) else {
                continue;
            };
            // Keyed by the bound's bits, ordered as the bound for the non-negative ones.
            let e = by_le.entry(order_key(le)).or_insert((le, 0.0));
            e.1 += s.value;
        }
        by_le.into_values().collect()
    }
}

fn order_key(x: f64) -> u64 {
    // Non-negative floats (and +Inf) order as their bits.
    x.max(0.0).to_bits()
}

/// Prometheus' value syntax: a float, `+Inf`, `-Inf` or `NaN`.
fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        t => t.parse().ok(),
    }
}

pub struct PrometheusText;

impl Format for PrometheusText {
    const NAME: &'static str = "prometheus";
    type Output = Vec<Scrape>;
    fn parse(input: &str) -> Parsed<Vec<Scrape>> {
        parse(input)
    }
}

/// Every scrape of the file, in order.
pub fn parse(input: &str) -> Parsed<Vec<Scrape>> {
    let mut scrapes: Vec<Scrape> = Vec::new();
    let mut diagnostics = Vec::new();
    let mut current: Option<Scrape> = None;
    for (i, raw) in input.lines().enumerate() {
        let line = raw.trim();
        if let Some(at) = line.strip_prefix("# sp-scrape ") {
            scrapes.extend(current.take());
            current = Some(Scrape {
                at_unix_s: at.trim().parse().ok(),
                samples: Vec::new(),
            });
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match sample_line(line) {
            Some(s) => current.get_or_insert_with(Scrape::default).samples.push(s),
            None if diagnostics.len() < 20 => {
                diagnostics.push(Diag::at(i + 1, "not a sample line: skipped"))
            }
            None => {}
        }
    }
    scrapes.extend(current);
    Parsed {
        value: scrapes,
        diagnostics,
    }
}

/// `name{label="value",...} value [timestamp]`.
fn sample_line(line: &str) -> Option<Sample> {
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = &line[..name_end];
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        let end;
        loop {
            // Skip separators.
            while let Some((_, c)) = chars.peek() {
                if *c == ',' || c.is_whitespace() {
                    chars.next();
                } else {
                    break;
                }
            }
            let (start, c) = *chars.peek()?;
            if c == '}' {
                end = start + 1;
                break;
            }
            let eq = body[start..].find('=')? + start;
            let key = body[start..eq].trim().to_string();
            while chars.peek().is_some_and(|(i, _)| *i <= eq) {
                chars.next();
            }
            if chars.next()?.1 != '"' {
                return None;
            }
            let mut value = String::new();
            loop {
                let (_, c) = chars.next()?;
                match c {
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    '"' => break,
                    other => value.push(other),
                }
            }
            labels.insert(key, value);
        }
        rest = &body[end..];
    }
    let value = parse_value(rest.split_whitespace().next()?)?;
    (!name.is_empty()).then(|| Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// A counter's growth between two scrapes (a counter that went down was reset: the later
/// value is all it grew).
pub fn counter_delta(
    first: &Scrape,
    last: &Scrape,
    name: &str,
    with: &[(&str, &str)],
) -> Option<f64> {
    let a = first.sum(name, with).unwrap_or(0.0);
    let b = last.sum(name, with)?;
    Some(if b >= a { b - a } else { b })
}

/// The histogram's observations made between two scrapes, as percentiles.
pub fn histogram_delta(first: &Scrape, last: &Scrape, histogram: &str) -> Option<LatencyQuantiles> {
    let before: BTreeMap<u64, f64> = first
        .buckets(histogram)
        .into_iter()
        .map(|(le, n)| (order_key(le), n))
        .collect();
    let buckets: Vec<(f64, f64)> = last
        .buckets(histogram)
        .into_iter()
        .map(|(le, n)| {
            (
                le,
                (n - before.get(&order_key(le)).copied().unwrap_or(0.0)).max(0.0),
            )
        })
        .collect();
    let count = counter_delta(first, last, &format!("{histogram}_count"), &[])?;
    let sum = counter_delta(first, last, &format!("{histogram}_sum"), &[])?;
    if count < 0.5 || buckets.is_empty() {
        return None;
    }
    let q = |phi: f64| quantile(&buckets, phi);
    let (p50_s, p50_bucket_s) = q(0.5)?;
    let (p90_s, p90_bucket_s) = q(0.9)?;
    let (p99_s, p99_bucket_s) = q(0.99)?;
    Some(LatencyQuantiles {
        count: count.round() as u64,
        mean_s: sum / count,
        p50_s,
        p90_s,
        p99_s,
        p50_bucket_s,
        p90_bucket_s,
        p99_bucket_s,
    })
}

/// `histogram_quantile`: the bucket holding rank `phi * total`, linearly interpolated within it
/// (from 0 for the first bucket); a rank in the `+Inf` bucket is the highest finite bound.
/// Returns the estimate and the bucket's bounds.
pub fn quantile(cumulative: &[(f64, f64)], phi: f64) -> Option<(f64, Bucket)> {
    let total = cumulative.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = phi * total;
    let mut lower_bound = 0.0;
    let mut lower_count = 0.0;
    for &(le, n) in cumulative {
        if n >= rank {
            if le.is_infinite() {
                return Some((
                    lower_bound,
                    Bucket {
                        lower: lower_bound,
                        upper: None,
                    },
                ));
            }
            let width = n - lower_count;
            let at = if width > 0.0 {
                lower_bound + (le - lower_bound) * (rank - lower_count) / width
            } else {
                le
            };
            return Some((
                at,
                Bucket {
                    lower: lower_bound,
                    upper: Some(le),
                },
            ));
        }
        lower_bound = le;
        lower_count = n;
    }
    None
}

/// Percentiles of exact observations (a client's own), with no bucket error: the bounds are the
/// value itself.
pub fn exact_quantiles(values: &mut [f64]) -> Option<LatencyQuantiles> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let at = |phi: f64| {
        // The nearest-rank percentile.
        let i = ((phi * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1;
        values[i]
    };
    let (p50_s, p90_s, p99_s) = (at(0.5), at(0.9), at(0.99));
    Some(LatencyQuantiles {
        count: values.len() as u64,
        mean_s: values.iter().sum::<f64>() / values.len() as f64,
        p50_s,
        p90_s,
        p99_s,
        p50_bucket_s: Bucket::exact(p50_s),
        p90_bucket_s: Bucket::exact(p90_s),
        p99_bucket_s: Bucket::exact(p99_s),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_escapes_and_special_values_are_read() {
        let p = parse(
            "# HELP x y\nm{a=\"1\",b=\"q\\\"uo,te\"} 2.5\nm_bucket{le=\"+Inf\"} 3\nbare 1e3 1700000000\nbroken{a=} 1\n",
        );
        let s = &p.value[0].samples;
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].labels["b"], "q\"uo,te");
        assert_eq!(s[1].labels["le"], "+Inf");
        assert_eq!(s[2].value, 1000.0);
        assert_eq!(p.diagnostics.len(), 1);
    }

    #[test]
    fn a_quantile_interpolates_within_its_bucket_and_names_it() {
        // 10 observations: 4 in (0, 0.1], 4 in (0.1, 0.5], 2 in (0.5, 1].
        let b = [(0.1, 4.0), (0.5, 8.0), (1.0, 10.0), (f64::INFINITY, 10.0)];
        let (p50, bounds) = quantile(&b, 0.5).unwrap();
        assert!((p50 - 0.2).abs() < 1e-9, "{p50}");
        assert_eq!((bounds.lower, bounds.upper), (0.1, Some(0.5)));
        let (p99, bounds) = quantile(&b, 0.99).unwrap();
        assert!((p99 - 0.975).abs() < 1e-9, "{p99}");
        assert_eq!((bounds.lower, bounds.upper), (0.5, Some(1.0)));
        // A rank past every finite bound is the highest one.
        let over = [(0.1, 1.0), (f64::INFINITY, 10.0)];
        assert_eq!(quantile(&over, 0.9).unwrap().0, 0.1);
    }

    #[test]
    fn a_window_is_the_difference_of_two_scrapes() {
        let p = parse(
            "# sp-scrape 100.0\nh_bucket{le=\"1\"} 5\nh_bucket{le=\"+Inf\"} 6\nh_sum 3\nh_count 6\n\
             # sp-scrape 110.0\nh_bucket{le=\"1\"} 5\nh_bucket{le=\"+Inf\"} 10\nh_sum 15\nh_count 10\n",
        );
        let (a, b) = (&p.value[0], &p.value[1]);
        assert_eq!(a.at_unix_s, Some(100.0));
        let q = histogram_delta(a, b, "h").unwrap();
        assert_eq!(q.count, 4);
        assert_eq!(q.mean_s, 3.0);
        // Every new observation was above 1 s.
        assert_eq!((q.p50_bucket_s.lower, q.p50_bucket_s.upper), (1.0, None));
    }
}
