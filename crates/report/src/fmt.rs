//! Numbers as the report prints them: bytes in binary units, times in s / ms / µs, shares
//! with one decimal. The same in every language.

use system_profile_model::report::Lang;

pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

pub fn bytes_f(b: f64) -> String {
    bytes(b.max(0.0).round() as u64)
}

pub fn secs(s: f64) -> String {
    let a = s.abs();
    if a == 0.0 {
        "0 s".into()
    } else if a >= 100.0 {
        format!("{s:.0} s")
    } else if a >= 1.0 {
        format!("{s:.2} s")
    } else if a >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

pub fn us(v: f64) -> String {
    secs(v * 1e-6)
}

/// A signed offset, µs, to the microsecond (a clock offset is worth its every digit).
pub fn signed_us(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:+.6} s", v * 1e-6)
    } else if a >= 1e3 {
        format!("{:+.3} ms", v * 1e-3)
    } else {
        format!("{v:+.1} µs")
    }
}

pub fn pct(p: f64) -> String {
    format!("{p:.1}%")
}

pub fn num(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// GB/s (10^9), or MB/s under 0.1 GB/s: gloo on a CPU moves megabytes, not gigabytes.
pub fn gbps(v: f64) -> String {
    if v > 0.0 && v < 0.1 {
        format!("{:.2} MB/s", v * 1e3)
    } else {
        format!("{v:.2} GB/s")
    }
}

/// English or Japanese.
/// A place in the code: `file:line`, or the file alone.
pub fn at(file: &str, line: Option<u32>) -> String {
    match line {
        Some(l) => format!("{file}:{l}"),
        None => file.to_string(),
    }
}

pub fn tr(lang: Lang, en: impl Into<String>, ja: impl Into<String>) -> String {
    match lang {
        Lang::En => en.into(),
        Lang::Ja => ja.into(),
    }
}

/// A table cell: the value or an em dash.
pub fn cell<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "—".into())
}

/// A run's status as the report's reader reads it (report.json keeps the wire word).
pub fn status_word(lang: Lang, status: &str) -> String {
    let ja = match status {
        "completed" => "完了",
        "failed" => "失敗",
        "timed_out" => "時間切れ",
        "cancelled" => "中止",
        "running" => "実行中",
        "skipped" => "スキップ",
        other => other,
    };
    tr(lang, status, ja)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(184_320), "180.0 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(secs(6.2), "6.20 s");
        assert_eq!(secs(0.0123), "12.3 ms");
        assert_eq!(secs(0.0000042), "4.2 µs");
        assert_eq!(num(12000), "12,000");
        assert_eq!(num(999), "999");
        assert_eq!(num(1_234_567), "1,234,567");
        assert_eq!(gbps(24.5), "24.50 GB/s");
        assert_eq!(gbps(0.003588), "3.59 MB/s");
        assert_eq!(gbps(0.0), "0.00 GB/s");
    }
}
