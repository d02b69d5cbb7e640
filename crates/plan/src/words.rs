//! The words of `$ARGUMENTS`: shell-like splitting, width folding, and the vocabulary of focus
//! words and filler in English and Japanese.

use system_profile_model::options::AskedOption;
use system_profile_model::target::Focus;

/// Fold full-width ASCII (`ＧＰＵ`) to ASCII, ideographic spaces and Japanese punctuation to
/// spaces; everything else is kept.
pub fn normalize(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{3000}' | '、' | '。' | '，' | '．' | '・' => ' ',
            '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
            _ => c,
        })
        .collect()
}

/// Split like a POSIX shell would (whitespace, single and double quotes, backslash), without
/// expanding anything. An unclosed quote takes the rest of the text and is reported.
pub fn split_args(text: &str) -> (Vec<String>, Option<String>) {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => match chars.next() {
                Some(n @ ('"' | '\\' | '$' | '`')) => cur.push(n),
                Some(n) => {
                    cur.push('\\');
                    cur.push(n);
                }
                None => cur.push('\\'),
            },
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    let diag = quote.map(|q| format!("unclosed {q} quote: read to the end of the arguments"));
    (out, diag)
}

/// Split a token where it changes between ASCII and other scripts (`train.pyのメモリ` →
/// `train.py`, `のメモリ`), as Japanese text has no spaces between words.
pub fn split_scripts(token: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut last_ascii: Option<bool> = None;
    for c in token.chars() {
        let ascii = c.is_ascii();
        if last_ascii != Some(ascii) {
            out.push(String::new());
            last_ascii = Some(ascii);
        }
        if let Some(cur) = out.last_mut() {
            cur.push(c);
        }
    }
    out
}

/// Words that name a focus. Several entries may share a word (`vram` is GPU memory).
const FOCUS_WORDS: &[(&str, Focus)] = &[
    ("cpu", Focus::Cpu),
    ("cpus", Focus::Cpu),
    ("hotspot", Focus::Cpu),
    ("hotspots", Focus::Cpu),
    ("processor", Focus::Cpu),
    // Asking for py-spy's idle or GIL samples is asking for the stacks.
    ("idle", Focus::Cpu),
    ("gil", Focus::Cpu),
    ("プロセッサ", Focus::Cpu),
    ("ホットスポット", Focus::Cpu),
    ("memory", Focus::Memory),
    ("mem", Focus::Memory),
    ("ram", Focus::Memory),
    ("rss", Focus::Memory),
    ("heap", Focus::Memory),
    ("allocations", Focus::Memory),
    ("allocation", Focus::Memory),
    ("leak", Focus::Memory),
    // memray's flame graph over time is an allocation profile.
    ("temporal", Focus::Memory),
    ("時系列", Focus::Memory),
    ("leaks", Focus::Memory),
    ("oom", Focus::Memory),
    ("vram", Focus::Memory),
    ("vram", Focus::Gpu),
    ("メモリー", Focus::Memory),
    ("メモリ", Focus::Memory),
    ("リーク", Focus::Memory),
    ("gpu", Focus::Gpu),
    ("gpus", Focus::Gpu),
    ("cuda", Focus::Gpu),
    ("kernels", Focus::Gpu),
    ("nvidia", Focus::Gpu),
    ("interconnect", Focus::Interconnect),
    ("nvlink", Focus::Interconnect),
    ("pcie", Focus::Interconnect),
    ("nccl", Focus::Interconnect),
    ("comm", Focus::Interconnect),
    ("comms", Focus::Interconnect),
    ("communication", Focus::Interconnect),
    ("collectives", Focus::Interconnect),
    ("allreduce", Focus::Interconnect),
    ("all-reduce", Focus::Interconnect),
    ("p2p", Focus::Interconnect),
    ("topology", Focus::Interconnect),
    ("topo", Focus::Interconnect),
    ("transfers", Focus::Interconnect),
    ("インターコネクト", Focus::Interconnect),
    ("相互接続", Focus::Interconnect),
    ("トポロジー", Focus::Interconnect),
    ("トポロジ", Focus::Interconnect),
    ("通信", Focus::Interconnect),
    ("転送", Focus::Interconnect),
    ("io", Focus::Io),
    ("i/o", Focus::Io),
    ("disk", Focus::Io),
    ("disks", Focus::Io),
    ("network", Focus::Io),
    ("syscalls", Focus::Io),
    ("syscall", Focus::Io),
    ("ディスク", Focus::Io),
    ("入出力", Focus::Io),
    ("ネットワーク", Focus::Io),
    ("system", Focus::System),
    ("machine", Focus::System),
    ("host", Focus::System),
    ("システム", Focus::System),
    ("マシン", Focus::System),
];

/// Words that carry no meaning for the target ("profile the ... please").
const FILLER: &[&str] = &[
    "the",
    "a",
    "an",
    "of",
    "on",
    "for",
    "in",
    "and",
    "with",
    "my",
    "this",
    "that",
    "please",
    "profile",
    "profiling",
    "check",
    "focus",
    "usage",
    "use",
    "bottleneck",
    "bottlenecks",
    "performance",
    "overhead",
    "utilization",
    "utilisation",
    "whole",
    "all",
    "to",
    "at",
    "by",
    "serving",
    "serve",
    "server",
    "process",
    "pid",
    "service",
    "run",
    "running",
    "is",
    "it",
];

/// Japanese particles and words that carry no meaning for the target, longest first.
const FILLER_JA: &[&str] = &[
    "を中心に",
    "について",
    "重点的に",
    "してください",
    "プロファイリング",
    "プロファイル",
    "ボトルネック",
    "オーバーヘッド",
    "パフォーマンス",
    "ください",
    "サービング",
    "して",
    "調べて",
    "計測",
    "測定",
    "使用量",
    "使用率",
    "性能",
    "全体",
    "関連",
    "中心",
    "重点",
    "周り",
    "まわり",
    "の",
    "を",
    "で",
    "と",
    "は",
    "が",
    "に",
    "や",
    "も",
];

/// The focus areas an ASCII word names (lower-cased), in table order.
pub fn focus_of_word(word: &str) -> Vec<Focus> {
    let w = word.to_lowercase();
    let w = w.trim_matches(|c: char| matches!(c, ',' | '.' | ';' | '!' | '?'));
    FOCUS_WORDS
        .iter()
        .filter(|(k, _)| *k == w)
        .map(|(_, f)| *f)
        .collect()
}

/// The profiler switch an ASCII word asks for (`idle`, `gil`, `native`, `leaks`).
pub fn option_of_word(word: &str) -> Option<AskedOption> {
    let w = word.to_lowercase();
    let w = w.trim_matches(|c: char| matches!(c, ',' | '.' | ';' | '!' | '?'));
    AskedOption::WORDS
        .iter()
        .find(|(k, _)| *k == w)
        .map(|(_, o)| *o)
}

pub fn is_filler(word: &str) -> bool {
    let w = word.to_lowercase();
    FILLER.contains(&w.trim_matches(|c: char| matches!(c, ',' | '.' | ';' | '!' | '?')))
}

/// What a run of non-ASCII text says: focus words found in it (with the word), the extra
/// phrases found (framework words, given by the caller), and what is left unexplained.
pub struct JapaneseReading {
    pub focus: Vec<(String, Focus)>,
    pub phrases: Vec<String>,
    pub leftover: String,
}

/// Read a run of non-ASCII text by finding known words in it, longest first.
pub fn read_non_ascii(run: &str, phrases: &[&str]) -> JapaneseReading {
    let mut rest = run.to_string();
    let mut found_phrases = Vec::new();
    let mut sorted: Vec<&str> = phrases.iter().copied().filter(|p| !p.is_ascii()).collect();
    sorted.sort_by_key(|p| std::cmp::Reverse(p.chars().count()));
    for p in sorted {
        if rest.contains(p) {
            rest = rest.replacen(p, " ", 1);
            found_phrases.push(p.to_string());
        }
    }
    let mut focus = Vec::new();
    let mut words: Vec<&(&str, Focus)> =
        FOCUS_WORDS.iter().filter(|(k, _)| !k.is_ascii()).collect();
    words.sort_by_key(|(k, _)| std::cmp::Reverse(k.chars().count()));
    for (k, f) in words {
        if rest.contains(k) {
            rest = rest.replace(k, " ");
            focus.push((k.to_string(), *f));
        }
    }
    for filler in FILLER_JA {
        rest = rest.replace(filler, " ");
    }
    let leftover = rest.split_whitespace().collect::<Vec<_>>().join(" ");
    JapaneseReading {
        focus,
        phrases: found_phrases,
        leftover,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_full_width_and_splits_like_a_shell() {
        assert_eq!(normalize("ＧＰＵ　メモリ、通信"), "GPU メモリ 通信");
        let (args, diag) = split_args(r#"train.py --name "my run" 'a b' c\ d"#);
        assert_eq!(args, vec!["train.py", "--name", "my run", "a b", "c d"]);
        assert!(diag.is_none());
        let (args, diag) = split_args(r#"x "unclosed"#);
        assert_eq!(args, vec!["x", "unclosed"]);
        assert!(diag.unwrap().contains("unclosed"));
        assert!(split_args("  ").0.is_empty());
    }

    #[test]
    fn splits_between_scripts() {
        assert_eq!(
            split_scripts("train.pyのメモリ"),
            vec!["train.py", "のメモリ"]
        );
        assert_eq!(split_scripts("gpu"), vec!["gpu"]);
    }

    #[test]
    fn reads_japanese_focus_and_leaves_the_rest() {
        let r = read_non_ascii("のメモリと通信を中心に", &[]);
        let f: Vec<Focus> = r.focus.iter().map(|x| x.1).collect();
        assert!(f.contains(&Focus::Memory) && f.contains(&Focus::Interconnect));
        assert_eq!(r.leftover, "");
        let r = read_non_ascii("分散学習の通信", &["学習", "分散学習"]);
        assert_eq!(r.phrases, vec!["分散学習"]);
        let r = read_non_ascii("謎の言葉", &[]);
        assert_eq!(r.leftover, "謎 言葉");
    }
}
