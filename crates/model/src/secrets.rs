//! What is written down or returned never holds a secret: the values of secret-looking
//! variables of the whole environment a child gets (the server's own, inherited, and the
//! call's), passwords in URLs, `Authorization` values, and values after secret-looking flags
//! or `NAME=value` words. The child still gets the real values; only our records, tails and
//! kept files see `***`. Pure: the caller gathers the environment.

use crate::run::MASKED_VALUE;

/// Whether a variable's or flag's name says it holds a secret: one of its `_`/`-`/`.`
/// separated words (or its end) is a token, key, secret, password, credential, auth, cookie,
/// webhook, passphrase or DSN word (`HF_TOKEN`, `OPENAI_API_KEY`, `DATABASE_URL` is
/// caught by its value instead, `SESSION_COOKIE`, `SLACK_WEBHOOK_URL`, `SSH_PASSPHRASE`).
pub fn is_secret_name(name: &str) -> bool {
    const WORDS: [&str; 20] = [
        "TOKEN",
        "TOKENS",
        "KEY",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "AUTH",
        "AUTHORIZATION",
        "PAT",
        "APIKEY",
        "COOKIE",
        "COOKIES",
        "WEBHOOK",
        "DSN",
    ];
    const ENDS: [&str; 7] = [
        "TOKEN",
        "KEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "COOKIE",
    ];
    let upper = name.trim_start_matches('-').to_ascii_uppercase();
    upper.split(['_', '-', '.']).any(|w| WORDS.contains(&w))
        || ENDS.iter().any(|e| upper.ends_with(e))
        // `MYSQL_PWD`, `DB_PWD`: a password by the name its client reads; `PWD` alone is the
        // shell's working directory.
        || upper.ends_with("_PWD")
}

/// The shortest value scrubbed wherever it appears: shorter ones (`1`, `true`, `user`) would
/// mangle ordinary text. Shorter secrets are still masked where their shape shows them
/// (`NAME=value`, a URL's password, an `Authorization` value, a flag's value).
const MIN_SECRET_CHARS: usize = 6;

/// Scrubs text and argv of the secrets of one environment.
#[derive(Debug, Clone, Default)]
pub struct Scrubber {
    /// Longest first, so a value that contains another is replaced whole.
    values: Vec<String>,
}

impl Scrubber {
    /// From every variable the child gets: values of secret-looking names, and the
    /// credentials of any URL in any value.
    pub fn from_env<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> Scrubber {
        let mut values = Vec::new();
        for (name, value) in vars {
            if is_secret_name(name) && value.chars().count() >= MIN_SECRET_CHARS {
                values.push(value.to_string());
            }
            for password in url_passwords(value) {
                if password.chars().count() >= MIN_SECRET_CHARS {
                    values.push(password.to_string());
                }
            }
        }
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Scrubber { values }
    }

    /// Learn the secrets an argv carries (the value after `--api-key`, of `--password=X`, of
    /// `API_KEY=X` words, after `Bearer`), so they are scrubbed wherever they show up again:
    /// a program that prints its argv, `time -v`'s "Command being timed", parsed metrics.
    /// A shell string is taken apart at whitespace for this.
    pub fn learn_argv(&mut self, argv: &[String]) {
        let words: Vec<String> = argv
            .iter()
            .flat_map(|a| {
                a.split_whitespace()
                    .map(|w| w.trim_matches(['"', '\'']).to_string())
            })
            .collect();
        let mut learned = Vec::new();
        for (i, w) in words.iter().enumerate() {
            if let Some((name, value)) = w.split_once('=') {
                if is_secret_name(name) && !value.is_empty() {
                    learned.push(value.to_string());
                }
            }
            let next = words.get(i + 1).filter(|n| !n.starts_with('-'));
            let flag = w.starts_with('-') && !w.contains('=') && w.len() > 2 && is_secret_name(w);
            let scheme = w.eq_ignore_ascii_case("bearer") || w.eq_ignore_ascii_case("basic");
            if let (true, Some(n)) = (flag || scheme, next) {
                learned.push(n.clone());
            }
        }
        for v in learned {
            if v.chars().count() >= 3 && v != MASKED_VALUE && !self.values.contains(&v) {
                self.values.push(v);
            }
        }
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// Every string in a JSON value scrubbed (parsed metrics carry command lines).
    pub fn json(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) => {
                let scrubbed = self.text(s);
                if scrubbed != *s {
                    *s = scrubbed;
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|v| self.json(v)),
            _ => {}
        }
    }

    /// The secret values this scrubber knows, for streams scrubbed piecewise.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// `text` with known values, URL passwords, `Authorization` values and the values of
    /// secret-looking `NAME=value` words masked.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), MASKED_VALUE);
            }
        }
        mask_patterns(&out)
    }

    /// Bytes that may not be UTF-8 (a kept stdout): scrubbed as text when they are, else
    /// by value only.
    pub fn bytes(&self, bytes: &[u8]) -> Vec<u8> {
        if let Ok(text) = std::str::from_utf8(bytes) {
            return self.text(text).into_bytes();
        }
        let mut out = bytes.to_vec();
        for v in &self.values {
            out = replace_bytes(&out, v.as_bytes(), MASKED_VALUE.as_bytes());
        }
        out
    }

    /// An argv with the value after a secret-looking flag (`--api-key X`) masked too.
    pub fn argv(&self, argv: &[String]) -> Vec<String> {
        let mut out: Vec<String> = argv.iter().map(|a| self.text(a)).collect();
        for i in 1..out.len() {
            let flag = &argv[i - 1];
            let is_flag = flag.starts_with('-') && !flag.contains('=') && flag.len() > 2;
            if is_flag && is_secret_name(flag) && !out[i].starts_with('-') {
                out[i] = MASKED_VALUE.to_string();
            }
            // `-H "Authorization: Bearer X"` is masked by `text`; a bare `Bearer X` pair too.
            if flag.eq_ignore_ascii_case("bearer") || flag.eq_ignore_ascii_case("basic") {
                out[i] = MASKED_VALUE.to_string();
            }
        }
        out
    }
}

fn replace_bytes(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

/// The passwords of `scheme://user:password@host` URLs in `text`.
fn url_passwords(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        let end = after
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(after.len());
        let authority = &after[..end];
        if let Some(cred_end) = authority.rfind('@') {
            if let Some((_, password)) = authority[..cred_end].split_once(':') {
                if !password.is_empty() {
                    out.push(password);
                }
            }
        }
        rest = &after[end..];
    }
    out
}

/// Mask what looks secret by its shape, whatever its value: URL passwords,
/// `Authorization: <scheme> <value>`, `Bearer <value>`, and `NAME=value` / `--name=value`
/// words whose name is secret-looking.
fn mask_patterns(text: &str) -> String {
    let mut out = text.to_string();
    for p in url_passwords(text) {
        out = out.replace(&format!(":{p}@"), &format!(":{MASKED_VALUE}@"));
    }
    out = mask_after_words(&out);
    // `NAME=value` words.
    let mut result = String::with_capacity(out.len());
    for word in split_keep(&out) {
        match word.split_once('=') {
            Some((name, value))
                if !value.is_empty()
                    && value != MASKED_VALUE
                    && !name.is_empty()
                    && name
                        .trim_start_matches('-')
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                    && is_secret_name(name) =>
            {
                result.push_str(name);
                result.push('=');
                result.push_str(MASKED_VALUE);
                // Keep a closing quote that belonged to the word.
                if let Some(q) = value.chars().last().filter(|c| matches!(c, '"' | '\'')) {
                    result.push(q);
                }
            }
            _ => result.push_str(word),
        }
    }
    result
}

/// Words and the whitespace between them, in order.
fn split_keep(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_space = None;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        if in_space != Some(space) {
            if i > start {
                parts.push(&text[start..i]);
            }
            start = i;
            in_space = Some(space);
        }
    }
    if start < text.len() {
        parts.push(&text[start..]);
    }
    parts
}

/// The word after `Bearer`, `Basic`, `Token` (in an `Authorization` value) and the value of
/// an `Authorization:`/`Cookie:` header line.
fn mask_after_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let lower = line.to_ascii_lowercase();
        let header = [
            "authorization:",
            "cookie:",
            "set-cookie:",
            "proxy-authorization:",
        ]
        .iter()
        .find_map(|h| lower.find(h).map(|at| at + h.len()));
        if let Some(at) = header {
            let (head, value) = line.split_at(at);
            let trimmed = value.trim_start();
            let lead = &value[..value.len() - trimmed.len()];
            let newline = if trimmed.ends_with('\n') { "\n" } else { "" };
            // Keep the scheme word (`Bearer`) so the line still says what it was.
            let scheme = trimmed
                .split_whitespace()
                .next()
                .filter(|w| {
                    ["bearer", "basic", "token", "digest"]
                        .contains(&w.to_ascii_lowercase().as_str())
                })
                .map(|w| format!("{w} "))
                .unwrap_or_default();
            // A quote that closed the header in a shell word stays.
            let quote = trimmed
                .trim_end()
                .chars()
                .last()
                .filter(|c| matches!(c, '"' | '\''))
                .map(String::from)
                .unwrap_or_default();
            out.push_str(head);
            out.push_str(lead);
            out.push_str(&scheme);
            out.push_str(MASKED_VALUE);
            out.push_str(&quote);
            out.push_str(newline);
        } else {
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_told_by_their_names() {
        for secret in [
            "HF_TOKEN",
            "HF_HUB_TOKEN",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "PGPASSWORD",
            "GITHUB_PAT",
            "wandb_api_key",
            "MY-AUTH",
            "DB_PASS",
            "SLACK_BOT_TOKEN",
            "SLACK_WEBHOOK_URL",
            "SESSION_COOKIE",
            "SSH_PASSPHRASE",
            "Authorization",
            "SENTRY_DSN",
            "--api-key",
            "--password",
            "MYSQL_PWD",
            "REDIS_PASSWORD",
        ] {
            assert!(is_secret_name(secret), "{secret}");
        }
        for plain in [
            "CUDA_VISIBLE_DEVICES",
            "PATH",
            "KEYBOARD",
            "PYTHONPATH",
            "NCCL_DEBUG",
            "MONKEY_MODE",
            "--nproc_per_node",
            "HOME",
            "PWD",
            "OLDPWD",
        ] {
            assert!(!is_secret_name(plain), "{plain}");
        }
    }

    fn scrubber() -> Scrubber {
        Scrubber::from_env([
            ("ANTHROPIC_API_KEY", "sk-ant-abcdef123456"),
            (
                "DATABASE_URL",
                "postgres://admin:S3CRETpw@db.example:5432/app",
            ),
            (
                "SLACK_WEBHOOK_URL",
                "https://hooks.slack.example/T000/B000/XXXX",
            ),
            ("HOME", "/root"),
            ("SHORT_TOKEN", "abcd"),
        ])
    }

    #[test]
    fn values_of_the_whole_environment_are_masked() {
        let s = scrubber();
        let t = s.text(
            "key sk-ant-abcdef123456, db postgres://admin:S3CRETpw@db.example:5432/app, \
             hook https://hooks.slack.example/T000/B000/XXXX, home /root",
        );
        assert!(!t.contains("sk-ant-abcdef123456"), "{t}");
        assert!(!t.contains("S3CRETpw"), "{t}");
        assert!(!t.contains("hooks.slack.example/T000"), "{t}");
        assert!(t.contains("postgres://admin:***@db.example"), "{t}");
        assert!(t.contains("home /root"), "{t}");
        // Too short to scrub by value without mangling text.
        assert_eq!(s.text("abcd ef"), "abcd ef");
    }

    #[test]
    fn shapes_are_masked_whatever_the_value() {
        let s = Scrubber::default();
        for (given, secret) in [
            ("curl -H 'Authorization: Bearer tok123xyz' x", "tok123xyz"),
            ("Authorization: Basic dXNlcjpwYXNz\n", "dXNlcjpwYXNz"),
            ("Cookie: sid=abc123def\n", "abc123def"),
            ("API_KEY=k3y-value python app.py", "k3y-value"),
            ("run --password=hunter22 now", "hunter22"),
            ("mysql://root:pw9999@localhost/db", "pw9999"),
        ] {
            let t = s.text(given);
            assert!(!t.contains(secret), "{given:?} -> {t:?}");
            assert!(t.contains(MASKED_VALUE), "{t}");
        }
        assert!(s
            .text("Authorization: Bearer x")
            .contains("Authorization: Bearer ***"));
        assert_eq!(s.text("loss=0.25 step=10"), "loss=0.25 step=10");
    }

    #[test]
    fn argv_values_after_secret_flags_are_masked() {
        let s = Scrubber::default();
        let argv: Vec<String> = [
            "python",
            "serve.py",
            "--api-key",
            "abc12345",
            "--token=zzz999",
            "--port",
            "8080",
            "-H",
            "Authorization: Bearer qqq777",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = s.argv(&argv);
        let joined = out.join(" ");
        for secret in ["abc12345", "zzz999", "qqq777"] {
            assert!(!joined.contains(secret), "{joined}");
        }
        // Learned, they are scrubbed where the program prints them back.
        let mut s = Scrubber::default();
        s.learn_argv(&argv);
        s.learn_argv(&["API_KEY=shellkey1 python app.py".to_string()]);
        let printed = s.text("argv ['serve.py', '--api-key', 'abc12345'] shellkey1 qqq777");
        for secret in ["abc12345", "shellkey1", "qqq777"] {
            assert!(!printed.contains(secret), "{printed}");
        }
        assert!(joined.contains("--port 8080"), "{joined}");
    }
}
