//! `system-profile profile <target>`: the engine's pipeline with a progress display on stderr
//! (a spinner per run with its elapsed time on a terminal, one line per event otherwise) and
//! the report's place on stdout.

use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use system_profile_engine::pipeline::{Instrumentation, PipelineConfig, PipelineEvent};
use system_profile_engine::{Engine, EngineError};

/// What the user typed after `profile`, joined back into one string as after the slash
/// command. A word with spaces that names an existing file is quoted so it stays one word;
/// any other (`"examples/memory_hog.py memory"`, as one argument) is the same words as
/// typed apart. Blank words are dropped.
pub fn join_words(words: &[String], exists: impl Fn(&str) -> bool) -> String {
    words
        .iter()
        .filter(|w| !w.trim().is_empty())
        .map(|w| {
            let plain = !w.contains(|c: char| c.is_whitespace() || "'\"\\".contains(c));
            if plain || (!exists(w) && !w.contains(['\'', '"', '\\'])) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Draws the events: a spinner for the run in progress, a line for everything else.
struct Display {
    bar: Mutex<Option<ProgressBar>>,
    tty: bool,
    lang: system_profile_model::report::Lang,
}

/// A progress line's label (a stage, or run/done/skipped) and a run's status, in the report's
/// language; the wire words stay in report.json.
fn label(lang: system_profile_model::report::Lang, word: &str) -> String {
    use system_profile_model::report::Lang;
    if lang != Lang::Ja {
        return word.to_string();
    }
    match word {
        "identify" => "特定",
        "detect" => "検出",
        "plan" => "計画",
        "instrument" => "計測挿入",
        "revert" => "復元",
        "summarize" => "要約",
        "run" => "実行",
        "done" => "終了",
        "skipped" => "スキップ",
        "completed" => "完了",
        "failed" => "失敗",
        "timed_out" => "時間切れ",
        "cancelled" => "中止",
        "error" => "エラー",
        other => other,
    }
    .to_string()
}

impl Display {
    fn new(lang: system_profile_model::report::Lang) -> Display {
        Display {
            bar: Mutex::new(None),
            tty: !ProgressDrawTarget::stderr().is_hidden(),
            lang,
        }
    }

    fn line(&self, text: &str) {
        let bar = self.bar.lock().unwrap_or_else(|p| p.into_inner());
        match bar.as_ref() {
            Some(b) => b.println(text),
            None => eprintln!("{text}"),
        }
    }

    fn show(&self, event: PipelineEvent) {
        match event {
            PipelineEvent::Stage { name, detail } => {
                self.line(&format!("{:>10}  {detail}", label(self.lang, name)))
            }
            PipelineEvent::RunStarted {
                index,
                total,
                step,
                title,
                method,
                background,
            } => {
                let what = format!(
                    "[{index}/{total}] {step} {method}{}: {title}",
                    if background { " (background)" } else { "" }
                );
                if self.tty && !background {
                    let bar = ProgressBar::new_spinner();
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    bar.set_message(what);
                    bar.enable_steady_tick(Duration::from_millis(120));
                    *self.bar.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar);
                } else {
                    self.line(&format!("{:>10}  {what}", label(self.lang, "run")));
                }
            }
            PipelineEvent::RunFinished {
                index,
                step,
                run_id,
                status,
                wall_s,
                note,
            } => {
                let wall = wall_s.map(|w| format!(" {w:.1} s")).unwrap_or_default();
                let mut text = format!(
                    "[{index}] {step} {} {}{wall}",
                    run_id.as_deref().unwrap_or(
                        if self.lang == system_profile_model::report::Lang::Ja {
                            "（未開始）"
                        } else {
                            "(not started)"
                        }
                    ),
                    label(self.lang, &status)
                );
                if status != "completed" {
                    if let Some(n) = note {
                        text.push_str(&format!(": {n}"));
                    }
                }
                let bar = self.bar.lock().unwrap_or_else(|p| p.into_inner()).take();
                match bar {
                    Some(b) if !b.is_finished() => {
                        b.finish_and_clear();
                        eprintln!("{:>10}  {text}", label(self.lang, "done"));
                    }
                    _ => eprintln!("{:>10}  {text}", label(self.lang, "done")),
                }
            }
            PipelineEvent::RunSkipped {
                index,
                step,
                reason,
            } => self.line(&format!(
                "{:>10}  [{index}] {step}: {reason}",
                label(self.lang, "skipped")
            )),
        }
    }
}

pub struct ProfileArgs {
    pub words: Vec<String>,
    pub budget_s: Option<f64>,
    pub instrumentation: Instrumentation,
    pub lang: system_profile_model::report::Lang,
    pub python: Option<String>,
}

pub async fn run(
    engine: Arc<Engine>,
    args: ProfileArgs,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<ExitCode> {
    let target = join_words(&args.words, |w| std::path::Path::new(w).exists());
    if target.trim().is_empty() {
        eprintln!("system-profile: name a target: a script (examples/cpu_hotspot.py), a command, `pid 4121`, a service name, or a focus word (`memory`)");
        return Ok(ExitCode::from(2));
    }
    if let Some(problem) = system_profile_plan::identify::pid_without_a_pid(&args.words) {
        eprintln!("system-profile: {problem}");
        return Ok(ExitCode::from(2));
    }
    let display = Display::new(args.lang);
    let config = PipelineConfig {
        target,
        budget_s: args.budget_s,
        instrumentation: args.instrumentation,
        lang: args.lang,
        python: args.python,
    };
    let observe = move |e: PipelineEvent| display.show(e);
    let outcome = tokio::select! {
        o = engine.profile(config, &observe) => o,
        () = shutdown => {
            // Dropping the pipeline kills its runs' process groups; then what escaped them.
            Engine::kill_all_runs();
            eprintln!(
                "system-profile: stopped; runs so far are in profile_output/{}/. Changes still \
                 applied, if any: `system-profile call list_changes`; undo them with \
                 `system-profile call revert_changes '{{\"all\": true}}'`",
                engine.session()
            );
            return Ok(ExitCode::from(130));
        }
    };
    match outcome {
        Ok(o) => {
            use std::io::Write as _;
            let completed = o.runs.iter().filter(|r| r.status == "completed").count();
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "target: {}", o.target_summary);
            let _ = writeln!(
                out,
                "runs: {completed} of {} completed in {:.1} s (session {})",
                o.runs.len(),
                o.wall_s,
                o.session
            );
            for r in o.runs.iter().filter(|r| r.status != "completed") {
                let _ = writeln!(
                    out,
                    "  {} {}: {}{}",
                    r.step,
                    r.method,
                    r.status,
                    r.note
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                );
            }
            if !o.changes.is_empty() {
                let state = if o.reverted {
                    "applied and reverted"
                } else {
                    "applied and kept: undo with `system-profile call revert_changes '{\"all\": true}'`"
                };
                let _ = writeln!(out, "instrumentation: {} ({state})", o.changes.join(", "));
            }
            for (i, r) in o.recommendations.iter().take(3).enumerate() {
                let _ = writeln!(out, "{}. {r}", i + 1);
            }
            let _ = writeln!(out, "report: {}", o.report_markdown_path);
            let _ = writeln!(out, "data: {}", o.report_json_path);
            if completed == 0 {
                // Nothing was measured: the report is a list of failures, not a profile.
                let first = o
                    .runs
                    .iter()
                    .find_map(|r| {
                        r.note
                            .as_deref()
                            .map(|n| format!("{} {}: {n}", r.step, r.method))
                    })
                    .unwrap_or_else(|| "the plan had no step that can run here".into());
                eprintln!("system-profile: no run completed; the first error: {first}");
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ EngineError::InvalidInput { .. }) => {
            eprintln!("system-profile: {e}");
            Ok(ExitCode::from(2))
        }
        Err(e) => {
            eprintln!("system-profile: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::join_words;

    #[test]
    fn words_keep_their_boundaries() {
        let w = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let none = |_: &str| false;
        assert_eq!(
            join_words(&w(&["train.py", "--n", "3", "gpu"]), none),
            "train.py --n 3 gpu"
        );
        // A file whose name has a space stays one word; so does a word with a quote.
        assert_eq!(
            join_words(&w(&["my file.py", "it's"]), |p| p == "my file.py"),
            r"'my file.py' 'it'\''s'"
        );
        // One quoted argument is the same words as typed apart.
        assert_eq!(
            join_words(&w(&["examples/memory_hog.py memory"]), none),
            "examples/memory_hog.py memory"
        );
        assert_eq!(join_words(&w(&["", "x", "  "]), none), "x");
        assert_eq!(join_words(&w(&["", " "]), none), "");
    }
}
