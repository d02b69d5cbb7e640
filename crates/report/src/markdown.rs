//! The report as Markdown, in English or Japanese: headings and sentences translated; numbers,
//! names, paths and code left as they are.

mod hotspots;
mod part_b;
mod recommendations;

use crate::fmt::{bytes, bytes_f, cell, gbps, num, pct, rate, secs, tr, us};
use hotspots::hotspots;
use part_b::part_b;
use recommendations::recommendations;
use system_profile_model::instrument::{ChangeState, ChangeType};
use system_profile_model::report::{Confidence, Lang, Report, Source};

/// User text (labels, targets, function names) in a table cell: it may not open HTML (a
/// label `<script>`), break the table (`|`, a newline) or start a code span.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace('`', "\\`")
        .replace(['\n', '\r'], " ")
        // A NUL (an argv can hold one) is no text a reader can see or a file should hold.
        .replace('\0', "\\0")
}

/// Our sentences, which quote user text in backticks already: only HTML is kept out, and only
/// outside the code spans (Markdown shows `&lt;` there as it is: `<locals>` stays readable).
/// A span holding a newline would end in a table; newlines become spaces everywhere.
fn prose(s: &str) -> String {
    let parts: Vec<&str> = s.split('`').collect();
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let part = part
                .replace('|', "\\|")
                .replace(['\n', '\r'], " ")
                .replace('\0', "\\0");
            // A span is closed by a later backtick; after an unmatched one, HTML is read again.
            if i % 2 == 1 && i + 1 < parts.len() {
                part
            } else {
                part.replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// User text in a code span: HTML is not read there, only a backtick ends it, so the span
/// takes more backticks than the text holds in a row.
pub(crate) fn code(s: &str) -> String {
    let text = s
        .replace(['\n', '\r'], " ")
        .replace('|', "\\|")
        .replace('\0', "\\0");
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(if text.contains('`') { longest + 1 } else { 1 });
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

pub(crate) fn cite(sources: &[Source]) -> String {
    sources
        .iter()
        .map(|s| match &s.artifact {
            Some(a) => format!("{} `{}`", s.run_id, a.rsplit('/').next().unwrap_or(a)),
            None => s.run_id.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Cells of one column that belong together: `a / b / c`.
fn slash(parts: &[String]) -> String {
    parts.join(" / ")
}

/// A cell that says nothing: `—`, or only dashes between slashes and around brackets.
fn is_empty_cell(cell: &str) -> bool {
    cell.chars()
        .all(|c| matches!(c, '—' | '/' | ' ' | '(' | ')'))
}

/// A Markdown table, without the columns no row has a value in (after the first, which
/// names the row).
pub(crate) fn table(md: &mut String, head: &[String], rows: &[Vec<String>]) {
    let keep: Vec<usize> = (0..head.len())
        .filter(|&c| {
            c == 0
                || rows.is_empty()
                || rows
                    .iter()
                    .any(|r| r.get(c).is_some_and(|cell| !is_empty_cell(cell)))
        })
        .collect();
    let pick = |cells: &[String]| -> String {
        keep.iter()
            .map(|&c| cells.get(c).map(String::as_str).unwrap_or(""))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    md.push_str(&format!("| {} |\n", pick(head)));
    md.push_str(&format!("|{}\n", "---|".repeat(keep.len())));
    for r in rows {
        md.push_str(&format!("| {} |\n", pick(r)));
    }
    md.push('\n');
}

pub(crate) fn heads(lang: Lang, pairs: &[(&str, &str)]) -> Vec<String> {
    pairs.iter().map(|(en, ja)| tr(lang, *en, *ja)).collect()
}

fn table_name(lang: Lang, table: &str) -> String {
    match table {
        "cpu" => tr(lang, "CPU overhead", "CPU オーバーヘッド"),
        "memory" => tr(lang, "Memory overhead", "メモリオーバーヘッド"),
        "interconnect" => tr(lang, "Interconnect", "インターコネクト"),
        "gpu" => tr(lang, "GPU compute", "GPU 計算"),
        "hotspots" => tr(
            lang,
            "Hotspots and bottlenecks",
            "ホットスポットとボトルネック",
        ),
        other => other.to_string(),
    }
}

/// A table's heading; false when the table is left out (its one line written instead).
fn open_section(md: &mut String, report: &Report, key: &str) -> bool {
    md.push_str(&format!("### {}\n\n", table_name(report.lang, key)));
    !omitted(md, report, key)
}

fn omitted(md: &mut String, report: &Report, table: &str) -> bool {
    if let Some(o) = report.omitted.iter().find(|o| o.table == table) {
        md.push_str(&format!("_{}_\n\n", o.reason));
        true
    } else {
        false
    }
}

fn confidence(lang: Lang, c: Confidence) -> String {
    match c {
        Confidence::High => tr(lang, "high", "高"),
        Confidence::Medium => tr(lang, "medium", "中"),
        Confidence::Low => tr(lang, "low", "低"),
    }
}

/// The whole report.
pub fn render(report: &Report) -> String {
    let lang = report.lang;
    let mut md = String::new();
    md.push_str(&format!(
        "# {}: {}\n\n",
        tr(lang, "Profile report", "プロファイルレポート"),
        report.session
    ));
    summary(&mut md, report);
    // Runs read.
    md.push_str(&format!("## {}\n\n", tr(lang, "Runs", "実行")));
    let rows: Vec<Vec<String>> = report
        .runs
        .iter()
        .map(|r| {
            vec![
                r.run_id.clone(),
                // One run, several observers: `measure + py_spy_record + perf_stat`.
                std::iter::once(r.profiler)
                    .chain(r.observers.iter().copied())
                    .map(|m| m.id())
                    .collect::<Vec<_>>()
                    .join(" + "),
                esc(r.label.as_deref().unwrap_or("")),
                match r.ended_after_step {
                    Some(step) => format!(
                        "{} {}",
                        crate::fmt::status_word(lang, &r.status),
                        tr(
                            lang,
                            format!("(ended after step {step}: a window)"),
                            format!("（ステップ {step} の後で終了: 区間）")
                        )
                    ),
                    None => crate::fmt::status_word(lang, &r.status),
                },
                code(&r.target),
                cell(r.wall_s, secs),
            ]
        })
        .collect();
    table(
        &mut md,
        &heads(
            lang,
            &[
                ("Run", "実行"),
                ("Method", "手法"),
                ("Label", "ラベル"),
                ("Status", "状態"),
                ("Target", "対象"),
                ("Wall", "実時間"),
            ],
        ),
        &rows,
    );
    for n in &report.not_run {
        md.push_str(&format!(
            "- {} {} ({}): {}\n",
            tr(lang, "Not run:", "実行せず:"),
            n.step,
            n.method.id(),
            esc(&n.reason)
        ));
    }
    if !report.not_run.is_empty() {
        md.push('\n');
    }
    md.push_str(&format!(
        "## {}\n\n",
        tr(lang, "Part A: results", "パート A: 結果")
    ));
    crate::serving::render(&mut md, report);
    cpu(&mut md, report);
    crate::rank_processes::render(&mut md, report);
    memory(&mut md, report);
    interconnect(&mut md, report);
    crate::nodes::render(&mut md, report);
    gpu(&mut md, report);
    hotspots(&mut md, report);
    crate::torch_ops::render(&mut md, report);
    charts(&mut md, report);
    recommendations(&mut md, report);
    part_b(&mut md, report);
    if !report.notes.is_empty() {
        md.push_str(&format!("## {}\n\n", tr(lang, "Notes", "注記")));
        for n in &report.notes {
            md.push_str(&format!("- {}\n", esc(n)));
        }
        md.push('\n');
    }
    md
}

/// The verdict first: what dominates, the top three recommendations, what was not measured.
fn summary(md: &mut String, report: &Report) {
    let lang = report.lang;
    md.push_str(&format!("## {}\n\n", tr(lang, "Summary", "要約")));
    for line in crate::serving::summary_lines(report) {
        md.push_str(&format!("- {line}\n"));
    }
    let hot = report
        .hotspots
        .iter()
        .flat_map(|t| t.rows.iter())
        .find(|h| h.kind == "python" || h.kind == "native");
    if let Some(h) = hot {
        let at = h
            .file
            .as_deref()
            .map(|f| {
                format!(
                    " ({}{})",
                    f,
                    h.line.map(|l| format!(":{l}")).unwrap_or_default()
                )
            })
            .unwrap_or_default();
        md.push_str(&tr(
            lang,
            format!(
                "- Most CPU: {}{} with {} of the samples in its own code.\n",
                code(&h.function),
                esc(&at),
                pct(h.self_percent)
            ),
            format!(
                "- CPU 最大: {}{}、自身のコードでサンプルの {}。\n",
                code(&h.function),
                esc(&at),
                pct(h.self_percent)
            ),
        ));
    }
    if let Some(w) = report
        .hotspots
        .iter()
        .flat_map(|t| t.rows.iter())
        .find(|h| h.kind == "waiting")
    {
        md.push_str(&tr(
            lang,
            format!(
                "- Sampled while blocked, not working: {} in {} ({} of the samples).\n",
                code(w.waits_in.as_deref().unwrap_or("?")),
                code(&w.function),
                pct(w.self_percent)
            ),
            format!(
                "- 待機中（処理ではない）のサンプル: {} 内の {}（サンプルの {}）。\n",
                code(&w.function),
                code(w.waits_in.as_deref().unwrap_or("?")),
                pct(w.self_percent)
            ),
        ));
    }
    if let Some(line) = crate::baseline::summary_line(report) {
        md.push_str(&line);
    }
    if let Some(busy) = report
        .recommendations
        .iter()
        .find(|r| r.rule == "cpu_contention")
    {
        md.push_str(&tr(
            lang,
            format!(
                "- Caveat: {}; every time here is slower than the program is.\n",
                prose(&busy.title)
            ),
            format!(
                "- 注意: {}。ここでの時間はすべてプログラムの実力より遅い。\n",
                prose(&busy.title)
            ),
        ));
    }
    for (i, r) in report.recommendations.iter().take(3).enumerate() {
        md.push_str(&format!("- #{}: {}\n", i + 1, prose(&r.title)));
    }
    if report.recommendations.is_empty() {
        md.push_str(&tr(
            lang,
            "- No recommendation: nothing measured crosses a rule's threshold.\n",
            "- 推奨事項なし: 閾値を超えた測定値はない。\n",
        ));
    }
    let failed: Vec<String> = report
        .runs
        .iter()
        .filter(|r| r.status == "failed" || r.status == "cancelled")
        .map(|r| {
            format!(
                "{} ({})",
                r.run_id,
                crate::fmt::status_word(lang, &r.status)
            )
        })
        .collect();
    // A cluster job's CPU, memory, hot functions (and GPUs, where its nodes have some) are
    // measured per node, in "Across nodes": not missing.
    let per_node = |table: &str| {
        !report.across_nodes.is_empty()
            && (matches!(table, "cpu" | "memory" | "hotspots")
                || (table == "gpu"
                    && report
                        .across_nodes
                        .iter()
                        .any(|a| a.profile.nodes.iter().any(|n| n.gpu.is_some()))))
    };
    let not_measured: Vec<String> = report
        .omitted
        .iter()
        .filter(|o| !per_node(&o.table))
        .map(|o| table_name(lang, &o.table))
        .collect();
    if !not_measured.is_empty() {
        md.push_str(&tr(
            lang,
            format!(
                "- Not measured: {} (why: in each section).\n",
                not_measured.join(", ")
            ),
            format!("- 未測定: {}（理由は各節）。\n", not_measured.join("、")),
        ));
    }
    if !failed.is_empty() {
        md.push_str(&tr(
            lang,
            format!(
                "- Runs that did not complete, left out of the tables: {} (see Notes).\n",
                failed.join(", ")
            ),
            format!(
                "- 完了しなかった実行（表から除外）: {}（注記を参照）。\n",
                failed.join("、")
            ),
        ));
    }
    md.push('\n');
}

fn cpu(md: &mut String, report: &Report) {
    let lang = report.lang;
    if !open_section(md, report, "cpu") {
        return;
    }
    let rows: Vec<Vec<String>> = report
        .cpu
        .iter()
        .map(|r| {
            vec![
                r.run_id.clone(),
                esc(&r.covers.text),
                cell(r.wall_s, secs),
                cell(r.user_s, secs),
                cell(r.sys_s, secs),
                cell(r.cpu_utilization_cores, |c| format!("{c:.2}")),
                cell(r.run_queue_cores, |c| format!("{c:.2}")),
                cell(r.cpu_utilization_of_machine_percent, pct),
                slash(&[
                    cell(r.voluntary_ctx_switches, num),
                    cell(r.involuntary_ctx_switches, num),
                ]),
                cell(r.ctx_switches, num),
                slash(&[
                    cell(r.voluntary_ctx_switches_per_s, rate),
                    cell(r.involuntary_ctx_switches_per_s, rate),
                ]),
                format!(
                    "{} ({} / {})",
                    cell(r.page_faults, num),
                    cell(r.major_faults, num),
                    cell(r.minor_faults, num)
                ),
                cell(r.cpu_migrations, num),
                cell(r.ipc, |v| format!("{v:.2}")),
                cite(&r.sources),
            ]
        })
        .collect();
    table(
        md,
        &heads(
            lang,
            &[
                ("Run", "実行"),
                ("Covers", "対象範囲"),
                ("Wall", "実時間"),
                ("User", "ユーザー"),
                ("Sys", "システム"),
                ("CPU util (cores)", "CPU 使用率（コア）"),
                ("Waiting for a CPU (cores)", "CPU 待ち（コア）"),
                ("Of machine", "マシン比"),
                (
                    "Ctx switches vol / invol",
                    "コンテキストスイッチ 自発 / 非自発",
                ),
                ("Ctx switches (both kinds)", "コンテキストスイッチ（合計）"),
                ("Per s vol / invol", "毎秒 自発 / 非自発"),
                (
                    "Page faults (major / minor)",
                    "ページフォルト（メジャー / マイナー）",
                ),
                ("Migrations", "マイグレーション"),
                ("IPC", "IPC"),
                ("Source", "出典"),
            ],
        ),
        &rows,
    );
    if let Some(n) = report.logical_cpus {
        md.push_str(&tr(
            lang,
            format!("CPU utilisation is CPU time over wall time; waiting for a CPU is the time runnable but not running (on a run queue, schedstat) over wall time: the two together are what the program wanted to run, and the rest of the wall time it was blocked. Voluntary switches are a thread blocking, involuntary ones a thread preempted; perf counts both in one figure. The machine has {n} logical CPUs. IPC is shown where hardware counters exist.\n\n"),
            format!("CPU 使用率は CPU 時間 ÷ 実時間。CPU 待ちは実行可能なのに実行されなかった時間（run queue、schedstat）÷ 実時間。両者の和がプログラムが実行したかった量で、残りの実時間はブロックしていた。自発的スイッチはスレッドのブロック、非自発的はプリエンプション。perf は両方を 1 つの数で数える。このマシンの論理 CPU は {n} 個。IPC はハードウェアカウンタがある場合のみ。\n\n"),
        ));
    }
}

fn memory(md: &mut String, report: &Report) {
    let lang = report.lang;
    if !open_section(md, report, "memory") {
        return;
    }
    let rows: Vec<Vec<String>> = report
        .memory
        .iter()
        .map(|r| {
            vec![
                r.run_id.clone(),
                r.place.clone(),
                match (r.rss_peak_bytes, r.processes) {
                    (Some(b), Some(n)) if n > 1 => tr(
                        lang,
                        format!("{} (sum of {n} processes)", bytes(b)),
                        format!("{}（{n} プロセスの和）", bytes(b)),
                    ),
                    (b, _) => cell(b, bytes),
                },
                cell(r.pss_peak_bytes, bytes),
                cell(
                    r.largest_process_rss_peak_bytes
                        .filter(|_| r.processes.is_some_and(|n| n > 1)),
                    bytes,
                ),
                cell(r.rss_last_bytes, bytes),
                slash(&[
                    cell(r.heap_peak_bytes, bytes),
                    cell(r.heap_last_bytes, bytes),
                ]),
                slash(&[
                    cell(r.gpu_allocated_bytes, bytes),
                    cell(r.gpu_reserved_bytes, bytes),
                    cell(r.gpu_peak_allocated_bytes, bytes),
                ]),
                match (r.gpu_used_peak_bytes, r.gpu_total_bytes) {
                    (Some(u), Some(t)) => format!("{} / {}", bytes(u), bytes(t)),
                    (Some(u), None) => bytes(u),
                    _ => "—".into(),
                },
                slash(&[
                    cell(r.duplicated_bytes, bytes),
                    cell(r.duplicated_same_place_bytes, bytes),
                ]),
                cell(r.share_of_gpus_percent, pct),
                cite(&r.sources),
            ]
        })
        .collect();
    table(
        md,
        &heads(
            lang,
            &[
                ("Run", "実行"),
                ("Where", "場所"),
                ("RSS peak", "RSS ピーク"),
                ("PSS peak (tree)", "PSS ピーク（ツリー）"),
                ("Largest process RSS", "最大プロセスの RSS"),
                ("RSS now (attached)", "現在の RSS（アタッチ時）"),
                ("Heap peak / at exit", "ヒープ ピーク / 終了時"),
                (
                    "GPU allocated / reserved / peak",
                    "GPU 確保 / 予約 / ピーク",
                ),
                ("GPU used peak / total", "GPU 使用ピーク / 総量"),
                ("Duplicated CPU+GPU / same place", "重複 CPU+GPU / 同一場所"),
                ("Share of GPUs", "GPU 間の比率"),
                ("Source", "出典"),
            ],
        ),
        &rows,
    );
    md.push_str(&tr(
        lang,
        "RSS of a tree is the largest sum over its processes at one reading, which counts a page shared by several processes once per process; PSS divides each shared page among its sharers and is what the tree really held. Duplicated: bytes of tensors with the same shape, dtype and sampled content found on the CPU and on a GPU at once, and held twice or more on the same place (every copy but one), from the instrumentation. Share of GPUs: this device's part of the GPUs' peak memory (even is 1/N).\n\n",
        "ツリーの RSS は 1 回の読み取りでの全プロセスの和で、共有ページをプロセスごとに数える。PSS は共有ページを共有数で割ったもので、ツリーが実際に保持した量。重複: 形状・dtype・標本化した内容が同じテンソルのうち、CPU と GPU に同時にあったもの、および同じ場所に 2 つ以上あったもの（1 つを除く全コピー）のバイト数。計測コードによる。GPU 間の比率: 各デバイスのピークメモリが全 GPU に占める割合（均等なら 1/N）。\n\n",
    ));
    crate::sites::render(md, report);
}

fn interconnect(md: &mut String, report: &Report) {
    let lang = report.lang;
    if !open_section(md, report, "interconnect") {
        return;
    }
    let Some(t) = &report.interconnect else {
        return;
    };
    if let Some(topo) = &t.topology {
        md.push_str(&format!("{}: {topo}\n\n", tr(lang, "Topology", "トポロジ")));
    }
    if !t.rows.is_empty() {
        let rows: Vec<Vec<String>> = t
            .rows
            .iter()
            .map(|r| {
                let size = match (r.bytes_p50, r.bytes_p95, r.bytes_mean) {
                    (Some(a), Some(b), _) => format!("{} / {}", bytes(a), bytes(b)),
                    (Some(a), None, _) => format!("{} / —", bytes(a)),
                    (None, _, Some(m)) => format!("{} ({})", bytes_f(m), tr(lang, "mean", "平均")),
                    _ => "—".into(),
                };
                let latency = match (r.latency_us_p50, r.latency_us_p95, r.latency_us_mean) {
                    (Some(a), Some(b), _) => format!("{} / {}", us(a), us(b)),
                    (None, _, Some(m)) => format!("{} ({})", us(m), tr(lang, "mean", "平均")),
                    (Some(a), None, _) => us(a),
                    _ => "—".into(),
                };
                vec![
                    match r.rank {
                        Some(n) => format!("{}, rank {n}", esc(&r.kind)),
                        None => esc(&r.kind),
                    },
                    num(r.count),
                    size,
                    cell(r.bytes_total, bytes),
                    latency,
                    cell(r.time_s, secs),
                    cell(r.bandwidth_gbps, gbps),
                    match (&r.link, r.link_peak_percent) {
                        (Some(l), Some(p)) => format!(
                            "{} ({} {})",
                            esc(l),
                            pct(p),
                            tr(lang, "of peak", "対ピーク")
                        ),
                        (Some(l), None) => esc(l),
                        _ => "—".into(),
                    },
                    cell(r.pageable_count, num),
                    cite(&r.sources),
                ]
            })
            .collect();
        table(
            md,
            &heads(
                lang,
                &[
                    ("Transfer", "転送"),
                    ("Count", "回数"),
                    ("Size p50 / p95", "サイズ p50 / p95"),
                    ("Total", "合計"),
                    ("Latency p50 / p95", "レイテンシ p50 / p95"),
                    ("Time", "時間"),
                    ("Bandwidth", "帯域"),
                    ("Link", "リンク"),
                    ("Pageable", "ページング可能"),
                    ("Source", "出典"),
                ],
            ),
            &rows,
        );
    }
    if !t.comm_compute.is_empty() {
        md.push_str(&format!(
            "{}\n\n",
            tr(
                lang,
                "Communication against computation:",
                "通信と計算の比:"
            )
        ));
        let rows: Vec<Vec<String>> = t
            .comm_compute
            .iter()
            .map(|c| {
                vec![
                    c.device.clone(),
                    us(c.comm_us),
                    us(c.compute_us),
                    format!("{:.3}", c.ratio),
                    pct(c.overlapped_percent),
                    cite(&c.sources),
                ]
            })
            .collect();
        table(
            md,
            &heads(
                lang,
                &[
                    ("GPU", "GPU"),
                    ("Communication", "通信"),
                    ("Compute", "計算"),
                    ("Comm / compute", "通信 / 計算"),
                    ("Hidden under compute", "計算に隠れた割合"),
                    ("Source", "出典"),
                ],
            ),
            &rows,
        );
    }
    crate::interconnect::render_balance(md, report);
}

fn gpu(md: &mut String, report: &Report) {
    let lang = report.lang;
    if !open_section(md, report, "gpu") {
        return;
    }
    let rows: Vec<Vec<String>> = report
        .gpu
        .iter()
        .map(|r| {
            vec![
                r.device.clone(),
                esc(r.name.as_deref().unwrap_or("—")),
                slash(&[
                    cell(r.sm_util_mean_percent, pct),
                    cell(r.sm_util_p95_percent, pct),
                ]),
                cell(r.mem_util_mean_percent, pct),
                cell(r.kernels, num),
                cell(r.kernel_time_s, secs),
                slash(&[cell(r.busy_percent, pct), cell(r.idle_percent, pct)]),
                slash(&[
                    cell(r.launch_mean_us, us),
                    cell(r.launch_to_start_p50_us, us),
                ]),
                cell(r.short_kernels_percent, pct),
                match (
                    r.memory_bandwidth_percent_of_peak,
                    r.memory_bandwidth_peak_gbps,
                ) {
                    (Some(p), Some(peak)) => {
                        format!("{} ({} {})", pct(p), tr(lang, "of", "対"), gbps(peak))
                    }
                    _ => "—".into(),
                },
                cite(&r.sources),
            ]
        })
        .collect();
    table(
        md,
        &heads(
            lang,
            &[
                ("GPU", "GPU"),
                ("Model", "モデル"),
                ("SM util mean / p95", "SM 使用率 平均 / p95"),
                ("Memory util", "メモリ使用率"),
                ("Kernels", "カーネル数"),
                ("Kernel time", "カーネル時間"),
                ("Busy / idle", "稼働 / アイドル"),
                ("Launch / launch-to-start", "起動 / 起動から開始まで"),
                ("Kernels < 10 µs", "10 µs 未満のカーネル"),
                ("Memory bandwidth vs peak", "メモリ帯域 対ピーク"),
                ("Source", "出典"),
            ],
        ),
        &rows,
    );
    md.push_str(&tr(
        lang,
        "SM and memory utilisation are NVML's shares of time with a kernel (or a memory access) running, not of throughput. Memory bandwidth: device-to-device copies (read + write) against the datasheet peak.\n\n",
        "SM・メモリ使用率は NVML による「カーネル（メモリアクセス）が動いていた時間の割合」で、スループットではない。メモリ帯域: デバイス内コピー（読み + 書き）をデータシートのピークと比較。\n\n",
    ));
}

/// A link from `profile_output/<session>/report.md` to a path relative to the root.
fn relative_link(session: &str, path: &str) -> String {
    let prefix = format!("profile_output/{session}/");
    match path.strip_prefix(&prefix) {
        Some(inside) => inside.to_string(),
        None => format!("../../{path}"),
    }
}

fn charts(md: &mut String, report: &Report) {
    if report.charts.is_empty() {
        return;
    }
    let lang = report.lang;
    md.push_str(&format!("### {}\n\n", tr(lang, "Charts", "グラフ")));
    for c in &report.charts {
        md.push_str(&format!(
            "![{}]({})\n\n",
            prose(&c.title),
            relative_link(&report.session, &c.path)
        ));
    }
}

#[cfg(test)]
mod escape_tests {
    use super::*;

    #[test]
    fn our_sentences_keep_code_spans_readable_and_html_out() {
        assert_eq!(
            prose("fewer calls to `_make_iterencode.<locals>._iterencode_dict` <b>"),
            "fewer calls to `_make_iterencode.<locals>._iterencode_dict` &lt;b&gt;"
        );
        // An unmatched backtick opens no span: what follows it is escaped.
        assert_eq!(prose("a `x` b `<script>"), "a `x` b `&lt;script&gt;");
        // No NUL reaches report.md, in a span or out of one.
        for text in [esc("a\0b"), code("a\0b"), prose("`a\0b` c\0")] {
            assert!(!text.contains('\0'), "{text:?}");
        }
    }

    #[test]
    fn user_text_opens_no_html_and_breaks_no_table() {
        assert_eq!(
            esc("<script>a|b</script>"),
            "&lt;script&gt;a\\|b&lt;/script&gt;"
        );
        assert_eq!(esc("x & `y`\nz"), "x &amp; \\`y\\` z");
        assert_eq!(code("python <script>.py"), "`python <script>.py`");
        assert_eq!(code("a`b"), "``a`b``");
    }
}
