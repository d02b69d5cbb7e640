//! Version strings out of `--version` banners.

/// The first word that looks like a version (`1.2`, `v0.17.0`, `valgrind-3.19.0`,
/// `2024.6.1.90-246`), without a leading `v` or trailing punctuation.
pub fn extract_version(banner: &str) -> Option<String> {
    for word in banner.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')') {
        for part in word.split('-') {
            let w = part.trim_end_matches(['.', ':', ';']);
            let w = w.strip_prefix('v').unwrap_or(w);
            let mut pieces = w.split('.');
            let looks = w.contains('.')
                && pieces.all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
            if looks {
                return Some(w.to_string());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::extract_version as v;

    #[test]
    fn banners_seen_in_the_wild() {
        assert_eq!(v("py-spy 0.4.1").as_deref(), Some("0.4.1"));
        assert_eq!(v("perf version 6.1.158").as_deref(), Some("6.1.158"));
        assert_eq!(
            v("strace -- version 6.1\nCopyright").as_deref(),
            Some("6.1")
        );
        assert_eq!(v("GNU time 1.9").as_deref(), Some("1.9"));
        assert_eq!(
            v("sysstat version 12.6.1\n(C) Sebastien").as_deref(),
            Some("12.6.1")
        );
        assert_eq!(v("vmstat from procps-ng 4.0.2").as_deref(), Some("4.0.2"));
        assert_eq!(v("bpftrace v0.17.0").as_deref(), Some("0.17.0"));
        assert_eq!(v("valgrind-3.19.0").as_deref(), Some("3.19.0"));
        assert_eq!(v("ltrace version 0.7.3.").as_deref(), Some("0.7.3"));
        assert_eq!(
            v("NVIDIA Nsight Systems version 2024.6.1.90-246").as_deref(),
            Some("2024.6.1.90")
        );
        assert_eq!(
            v("NVIDIA-SMI version  : 590.48.01").as_deref(),
            Some("590.48.01")
        );
        assert_eq!(v("no digits here"), None);
        assert_eq!(v("build 1234"), None);
    }
}
