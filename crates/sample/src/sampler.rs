//! The /proc process-tree sampler: a thread that reads, at a fixed rate, each process of a
//! tree. Every tick it reads /proc/<pid>/statm (the resident set: memory peaks are what a
//! fast rate is for); every `detail_every` ticks /proc/<pid>/stat (CPU ticks, threads),
//! every thread's status and schedstat (context switches, on-CPU and run-queue time: see
//! `threads`), /proc/<pid>/io (storage bytes) and the main thread's children list; once every
//! ten detail ticks every thread's children list and new threads. /proc/<pid>/smaps_rollup
//! (the proportional set size) walks every mapping, so it is read every fifth detail tick. CPU
//! times tick at USER_HZ (100 per second), so reading them faster than 10 Hz would only
//! show 0-or-1-tick steps, at ten times the cost of statm. All files stay open and are re-read
//! from offset 0, which is what keeps 100 Hz cheap. A process is seen to end on the tick it
//! does (statm goes empty when it becomes a zombie, or unreadable once reaped); its counters
//! are then read one last time, while it is still a zombie if it is.

use crate::background::{pace, Background};
use crate::proc::{page_size, parse_stat, parse_statm, read_process, stat_comm, ticks_per_second};
use crate::threads::{parse_pss_bytes, reread, Threads};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use system_profile_model::metrics::{ProcessUsage, ProcfsSummary};
use system_profile_model::target::RankProcess;
use system_profile_parse::launcher::rank_of;

/// How to sample.
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    /// Samples per second (default 100).
    pub rate_hz: f64,
    /// CPU, threads, context switches, I/O and new children every this many samples
    /// (default 10); the resident set is read on every sample.
    pub detail_every: u32,
    /// Where to write one JSON line per process per sample; `None` keeps only the summary.
    pub jsonl: Option<PathBuf>,
    /// Counts the samples as they are taken, for progress reports while the sampler runs.
    pub samples_taken: Option<Arc<std::sync::atomic::AtomicU64>>,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            rate_hz: 100.0,
            detail_every: 10,
            jsonl: None,
            samples_taken: None,
        }
    }
}

/// A running sampler; `stop` ends it and returns what it saw. Dropped without `stop` (its run
/// was cancelled), its thread ends too.
pub struct Sampler(Background<ProcfsSummary>);

/// What is kept of one process between samples.
struct Tracked {
    stat: File,
    statm: File,
    /// /proc/<pid>/io and the main thread's children list, kept open and re-read like
    /// `stat` (absent when not readable).
    io: Option<File>,
    threads: Threads,
    pss_peak: Option<u64>,
    pss_last: Option<u64>,
    children: Option<File>,
    ppid: u32,
    name: String,
    cmdline: Vec<String>,
    first_seen_s: f64,
    last_seen_s: f64,
    first_ticks: (u64, u64),
    last_ticks: (u64, u64),
    rss_peak: u64,
    rss_sum: u128,
    rss_samples: u64,
    threads_peak: u32,
    threads_last: u32,
    io_first: Option<(u64, u64)>,
    io_last: Option<(u64, u64)>,
    /// Its place in a distributed job, from its environment (which never changes).
    rank: Option<RankProcess>,
    exited: bool,
}

/// voluntary and nonvoluntary context switches from the text of /proc/<pid>/status. By hand:
/// read per thread on every detail tick, and `procfs`'s `Status::from_read` builds all ~55
/// fields of the file for these two (`examples/stat_parse.rs` measures both).
pub fn parse_ctx_switches(status: &str) -> Option<(u64, u64)> {
    let (mut voluntary, mut involuntary) = (None, None);
    // The two lines end the file: scan from the back.
    for line in status.lines().rev() {
        if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
            voluntary = v.trim().parse::<u64>().ok();
        } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
            involuntary = v.trim().parse::<u64>().ok();
        }
        if voluntary.is_some() && involuntary.is_some() {
            break;
        }
    }
    Some((voluntary?, involuntary?))
}

/// read_bytes and write_bytes (storage, in bytes) from the text of /proc/<pid>/io, parsed by
/// `procfs`.
pub fn parse_io(io: &str) -> Option<(u64, u64)> {
    use procfs::FromRead;
    let io = procfs::process::Io::from_read(io.as_bytes()).ok()?;
    Some((io.read_bytes, io.write_bytes))
}

/// The children of `pid`, from every thread's /proc/<pid>/task/<tid>/children.
fn children(pid: u32) -> Vec<u32> {
    let Some(tasks) = i32::try_from(pid)
        .ok()
        .and_then(|pid| procfs::process::Process::new(pid).ok())
        .and_then(|p| p.tasks().ok())
    else {
        return Vec::new();
    };
    tasks
        .flatten()
        .flat_map(|task| task.children().unwrap_or_default())
        .collect()
}

/// CPU time this thread has used, in seconds, from clock_gettime(CLOCK_THREAD_CPUTIME_ID)
/// (the scheduler's nanosecond count; getrusage's is split by tick-sampled ratios).
pub(crate) fn own_cpu_s() -> f64 {
    // SAFETY: clock_gettime writes the zeroed timespec it is given and has no other effect.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

impl Tracked {
    /// The resident set now, in bytes, from /proc/<pid>/statm; `None` once the process has
    /// ended (reaped, or a zombie without a memory map).
    fn rss_bytes(&self, buf: &mut [u8], page: u64) -> Option<u64> {
        let n = self.statm.read_at(buf, 0).ok()?;
        let m = std::str::from_utf8(&buf[..n]).ok().and_then(parse_statm)?;
        (m.size_pages > 0).then_some(m.resident_pages * page)
    }

    /// CPU ticks, threads and the resident set (bytes) from /proc/<pid>/stat, context
    /// switches from status and bytes from io; the resident set, or `None` when the process
    /// has ended (a zombie's counters are still taken: they are its final ones).
    fn read_counters(
        &mut self,
        pid: u32,
        buf: &mut [u8],
        text_buf: &mut Vec<u8>,
        now_s: f64,
        page: u64,
    ) -> Option<u64> {
        let n = self.stat.read_at(buf, 0).unwrap_or(0);
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let stat = parse_stat(text)?;
        // A child first seen between its fork and its exec (`time` starting the command) bore
        // its parent's name and argv: the exec changes the name in stat, and both are read
        // again then.
        if let Some(comm) = stat_comm(text).filter(|c| *c != self.name) {
            self.name = comm.to_string();
            if let Some(argv) = crate::proc::cmdline(pid) {
                self.cmdline = argv;
            }
        }
        self.last_seen_s = now_s;
        self.last_ticks = (stat.utime_ticks, stat.stime_ticks);
        self.threads_peak = self.threads_peak.max(stat.threads);
        self.threads_last = stat.threads;
        self.threads.read(text_buf);
        if let Some(io) = self
            .io
            .as_ref()
            .and_then(|f| reread(f, text_buf))
            .and_then(parse_io)
        {
            self.io_first.get_or_insert(io);
            self.io_last = Some(io);
        }
        (stat.state != 'Z' && stat.state != 'X').then_some(stat.rss_pages * page)
    }

    /// One line of the timeline: the resident set on every tick, the counters on the ticks
    /// that read them.
    fn jsonl_line(&self, now_s: f64, pid: u32, rss: u64, detail: bool, ticks: f64) -> String {
        let mut line = format!("{{\"t_s\":{now_s:.4},\"pid\":{pid},\"rss_bytes\":{rss}");
        if detail {
            line.push_str(&format!(
                ",\"cpu_user_s\":{:.2},\"cpu_sys_s\":{:.2},\"threads\":{}",
                self.last_ticks.0 as f64 / ticks,
                self.last_ticks.1 as f64 / ticks,
                self.threads_last
            ));
            if let Some((c, schedstat)) = self.threads.total() {
                line.push_str(&format!(
                    ",\"voluntary_ctx_switches\":{},\"involuntary_ctx_switches\":{}",
                    c.voluntary_ctx_switches, c.involuntary_ctx_switches
                ));
                if schedstat {
                    line.push_str(&format!(
                        ",\"run_queue_s\":{:.3}",
                        c.run_queue_ns as f64 / 1e9
                    ));
                }
            }
            if let Some(pss) = self.pss_last {
                line.push_str(&format!(",\"pss_bytes\":{pss}"));
            }
            if let Some((r, w)) = self.io_last {
                line.push_str(&format!(",\"read_bytes\":{r},\"write_bytes\":{w}"));
            }
        }
        line.push_str("}\n");
        line
    }
}

impl Sampler {
    /// Start sampling `root` and its descendants now.
    pub fn start(root: u32, config: SamplerConfig) -> Sampler {
        Sampler(
            Background::spawn(format!("procfs-sampler-{root}"), move |stop| {
                sample_loop(root, config, stop)
            })
            .expect("spawn the sampler thread"),
        )
    }

    /// Stop after the current sample and return the summary.
    pub fn stop(self) -> ProcfsSummary {
        self.0.stop()
    }

    /// Whether the whole tree has ended (the sampler stops by itself then).
    pub fn finished(&self) -> bool {
        self.0.finished()
    }
}

/// Start tracking `pid`. A process born after `born_after_ticks` (clock ticks since boot) has
/// all its CPU time counted; an older one, only what it uses from now on.
fn track(pid: u32, now_s: f64, born_after_ticks: u64) -> Option<Tracked> {
    let snap = read_process(pid)?;
    let from_birth = snap.start_ticks >= born_after_ticks;
    let baseline = if from_birth {
        (0, 0)
    } else {
        (snap.utime_ticks, snap.stime_ticks)
    };
    let mut threads = Threads::new(pid, from_birth);
    threads.discover(born_after_ticks);
    let open = |name: &str| File::open(format!("/proc/{pid}/{name}")).ok();
    Some(Tracked {
        stat: open("stat")?,
        statm: open("statm")?,
        io: open("io"),
        threads,
        pss_peak: None,
        pss_last: None,
        children: open(&format!("task/{pid}/children")),
        ppid: snap.ppid,
        name: snap.comm,
        cmdline: snap.cmdline,
        first_seen_s: now_s,
        last_seen_s: now_s,
        first_ticks: baseline,
        last_ticks: (snap.utime_ticks, snap.stime_ticks),
        rss_peak: snap.rss_bytes,
        rss_sum: 0,
        rss_samples: 0,
        threads_peak: snap.threads,
        threads_last: snap.threads,
        io_first: None,
        io_last: None,
        rank: rank_of(pid, Some(snap.ppid), &crate::proc::environ(pid)),
        exited: false,
    })
}

fn sample_loop(root: u32, config: SamplerConfig, stop: &AtomicBool) -> ProcfsSummary {
    let started = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / config.rate_hz.clamp(0.1, 10_000.0));
    let ticks = ticks_per_second() as f64;
    // Processes born from two ticks before the sampler on (the command it was started for,
    // and every child found later, up to 100 ms after its birth) count from their first
    // instruction.
    let born_after_ticks = (crate::proc::uptime_s().unwrap_or(0.0) * ticks) as u64;
    let born_after_ticks = born_after_ticks.saturating_sub(2);
    let page = page_size();
    let mut out = config
        .jsonl
        .as_ref()
        .and_then(|p| File::create(p).ok())
        .map(BufWriter::new);
    let mut tracked: BTreeMap<u32, Tracked> = BTreeMap::new();
    let mut samples: u64 = 0;
    let mut rss_peak_total: u64 = 0;
    let mut pss_peak_total: Option<u64> = None;
    let mut buf = vec![0u8; 1024];
    let mut text_buf = vec![0u8; 4096];
    let mut next = started;
    loop {
        let now_s = started.elapsed().as_secs_f64();
        let every = u64::from(config.detail_every.max(1));
        let detail = samples % every == 0;
        // Children forked by other threads than the main one show only in their own task's
        // list: those lists are read ten times less often.
        let full_scan = samples % (every * 10) == 0;
        // smaps_rollup walks every mapping: on every fifth detail tick (2 Hz at the default
        // rate), which costs a fifth of reading it on each and still gives a short program
        // more than its first instant.
        let pss_tick = samples % (every * 5) == 0;
        if detail {
            // Discovery: the root, then the children of everything alive.
            let mut frontier: Vec<u32> = vec![root];
            let mut seen: Vec<u32> = Vec::new();
            while let Some(pid) = frontier.pop() {
                if seen.contains(&pid) {
                    continue;
                }
                seen.push(pid);
                if let std::collections::btree_map::Entry::Vacant(slot) = tracked.entry(pid) {
                    match track(pid, now_s, born_after_ticks) {
                        Some(t) => {
                            slot.insert(t);
                        }
                        None => continue,
                    }
                }
                let Some(t) = tracked.get(&pid).filter(|t| !t.exited) else {
                    continue;
                };
                let main_thread_children =
                    t.children.as_ref().and_then(|f| reread(f, &mut text_buf));
                match (full_scan, main_thread_children) {
                    (false, Some(list)) => frontier.extend(
                        list.split_whitespace()
                            .filter_map(|c| c.parse::<u32>().ok()),
                    ),
                    _ => frontier.extend(children(pid)),
                }
            }
        }
        let mut rss_total = 0;
        let mut pss_total: Option<u64> = None;
        let mut alive = 0;
        for (pid, t) in tracked.iter_mut().filter(|(_, t)| !t.exited) {
            if full_scan {
                t.threads.discover(born_after_ticks);
            }
            if pss_tick {
                // Opened afresh each time: an open smaps_rollup keeps the memory map it was
                // opened on, which a process that exec'd since (a command started through
                // `time`) no longer uses.
                t.pss_last = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
                    .ok()
                    .as_deref()
                    .and_then(parse_pss_bytes);
                if let Some(pss) = t.pss_last {
                    t.pss_peak = Some(t.pss_peak.map_or(pss, |p| p.max(pss)));
                    *pss_total.get_or_insert(0) += pss;
                }
            }
            // Detail ticks take the resident set from stat, which they read anyway.
            let rss = if detail {
                t.read_counters(*pid, &mut buf, &mut text_buf, now_s, page)
            } else {
                t.rss_bytes(&mut buf, page).or_else(|| {
                    // It ended since the last tick: a last look at its counters, final if it
                    // is still a zombie.
                    t.read_counters(*pid, &mut buf, &mut text_buf, now_s, page);
                    None
                })
            };
            let Some(rss) = rss else {
                t.exited = true;
                continue;
            };
            alive += 1;
            t.rss_peak = t.rss_peak.max(rss);
            t.rss_sum += u128::from(rss);
            t.rss_samples += 1;
            rss_total += rss;
            if let Some(w) = out.as_mut() {
                let line = t.jsonl_line(now_s, *pid, rss, detail, ticks);
                if w.write_all(line.as_bytes()).is_err() {
                    out = None;
                }
            }
        }
        rss_peak_total = rss_peak_total.max(rss_total);
        if let Some(pss) = pss_total {
            pss_peak_total = Some(pss_peak_total.map_or(pss, |p: u64| p.max(pss)));
        }
        samples += 1;
        if let Some(c) = &config.samples_taken {
            c.store(samples, Ordering::Relaxed);
        }
        if stop.load(Ordering::SeqCst) || (alive == 0 && samples > 1) {
            break;
        }
        pace(&mut next, interval);
    }
    if let Some(mut w) = out {
        let _ = w.flush();
    }
    let wall_s = started.elapsed().as_secs_f64();
    let delta = |a: Option<(u64, u64)>, b: Option<(u64, u64)>| match (a, b) {
        (Some(a), Some(b)) => Some((b.0.saturating_sub(a.0), b.1.saturating_sub(a.1))),
        _ => None,
    };
    let mut run_queue_s: Option<f64> = None;
    let mut processes: Vec<ProcessUsage> = tracked
        .iter()
        .map(|(pid, t)| {
            let sched = t.threads.total();
            let io = delta(t.io_first, t.io_last);
            let process_run_queue_s = sched
                .filter(|(_, schedstat)| *schedstat)
                .map(|(c, _)| c.run_queue_ns as f64 / 1e9);
            if let Some(q) = process_run_queue_s {
                *run_queue_s.get_or_insert(0.0) += q;
            }
            ProcessUsage {
                pid: *pid,
                ppid: t.ppid,
                name: t.name.clone(),
                cmdline: t.cmdline.clone(),
                first_seen_s: t.first_seen_s,
                last_seen_s: t.last_seen_s,
                cpu_user_s: t.last_ticks.0.saturating_sub(t.first_ticks.0) as f64 / ticks,
                cpu_sys_s: t.last_ticks.1.saturating_sub(t.first_ticks.1) as f64 / ticks,
                rss_peak_bytes: t.rss_peak,
                rss_mean_bytes: if t.rss_samples > 0 {
                    (t.rss_sum / u128::from(t.rss_samples)) as u64
                } else {
                    0
                },
                threads_peak: t.threads_peak,
                voluntary_ctx_switches: sched.map(|(c, _)| c.voluntary_ctx_switches),
                involuntary_ctx_switches: sched.map(|(c, _)| c.involuntary_ctx_switches),
                run_queue_s: process_run_queue_s,
                main_thread_blocked_s: t.threads.main_thread_blocked_s(),
                threads_seen: t.threads.seen() as u32,
                pss_peak_bytes: t.pss_peak,
                read_bytes: io.map(|c| c.0),
                write_bytes: io.map(|c| c.1),
                exited: t.exited,
                ids: t.rank.as_ref().map(|r| r.ids).unwrap_or_default(),
            }
        })
        .collect();
    processes.sort_by(|a, b| (b.cpu_user_s + b.cpu_sys_s).total_cmp(&(a.cpu_user_s + a.cpu_sys_s)));
    let sum = |f: fn(&ProcessUsage) -> Option<u64>| processes.iter().filter_map(f).sum::<u64>();
    let cpu_user_s: f64 = processes.iter().map(|p| p.cpu_user_s).sum();
    let cpu_sys_s: f64 = processes.iter().map(|p| p.cpu_sys_s).sum();
    ProcfsSummary {
        root_pid: root,
        wall_s,
        samples,
        rate_hz_requested: config.rate_hz,
        rate_hz_achieved: if wall_s > 0.0 {
            samples as f64 / wall_s
        } else {
            0.0
        },
        cpu_user_s,
        cpu_sys_s,
        cpu_utilization: if wall_s > 0.0 {
            (cpu_user_s + cpu_sys_s) / wall_s
        } else {
            0.0
        },
        rss_peak_bytes: rss_peak_total,
        pss_peak_bytes: pss_peak_total,
        run_queue_s,
        voluntary_ctx_switches: sum(|p| p.voluntary_ctx_switches),
        involuntary_ctx_switches: sum(|p| p.involuntary_ctx_switches),
        read_bytes: sum(|p| p.read_bytes),
        write_bytes: sum(|p| p.write_bytes),
        processes,
        sampler_cpu_s: own_cpu_s(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_io_fields() {
        let status =
            "Name:\tpython3\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_ctx_switches(status), Some((12, 3)));
        assert_eq!(parse_ctx_switches("Name: x\n"), None);
        let io = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_io(io), Some((4096, 8192)));
    }
}
