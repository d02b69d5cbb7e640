//! Per-thread scheduler counters of one process: context switches from
//! /proc/<pid>/task/<tid>/status and on-CPU and run-queue time from
//! /proc/<pid>/task/<tid>/schedstat, summed over every thread seen. /proc/<pid>/status and
//! /proc/<pid>/schedstat hold the thread-group leader's counters only, which for a threaded
//! program (a training with data-loader threads, a threaded server) is a fraction of the
//! truth; and only schedstat separates "runnable but not running" (the machine was busy)
//! from "blocked" (the program waited).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Instant;

/// One reading of a thread, or a sum over threads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SchedCounters {
    pub voluntary_ctx_switches: u64,
    pub involuntary_ctx_switches: u64,
    /// Time on a CPU (schedstat field 1), in nanoseconds.
    pub on_cpu_ns: u64,
    /// Time runnable on a run queue but not running (schedstat field 2), in nanoseconds.
    pub run_queue_ns: u64,
}

impl SchedCounters {
    fn since(self, first: SchedCounters) -> SchedCounters {
        SchedCounters {
            voluntary_ctx_switches: self
                .voluntary_ctx_switches
                .saturating_sub(first.voluntary_ctx_switches),
            involuntary_ctx_switches: self
                .involuntary_ctx_switches
                .saturating_sub(first.involuntary_ctx_switches),
            on_cpu_ns: self.on_cpu_ns.saturating_sub(first.on_cpu_ns),
            run_queue_ns: self.run_queue_ns.saturating_sub(first.run_queue_ns),
        }
    }

    fn add(&mut self, other: SchedCounters) {
        self.voluntary_ctx_switches += other.voluntary_ctx_switches;
        self.involuntary_ctx_switches += other.involuntary_ctx_switches;
        self.on_cpu_ns += other.on_cpu_ns;
        self.run_queue_ns += other.run_queue_ns;
    }
}

/// `run_ns wait_ns timeslices` of /proc/.../schedstat: on-CPU and run-queue nanoseconds.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    use procfs::FromRead;
    let s = procfs::process::Schedstat::from_read(text.as_bytes()).ok()?;
    Some((s.sum_exec_runtime, s.run_delay))
}

/// The `Pss:` line of /proc/<pid>/smaps_rollup, in bytes: the process's resident pages with
/// each shared page divided among the processes that map it, so that a tree's sum counts a
/// shared library once.
pub fn parse_pss_bytes(smaps_rollup: &str) -> Option<u64> {
    use procfs::FromBufRead;
    let rollup = procfs::process::SmapsRollup::from_buf_read(smaps_rollup.as_bytes()).ok()?;
    let all = rollup.memory_map_rollup.0.into_iter().next()?;
    all.extension.map.get("Pss").copied()
}

struct Thread {
    status: Option<File>,
    schedstat: Option<File>,
    first: Option<SchedCounters>,
    last: Option<SchedCounters>,
    /// Its first and latest actual readings with their instants (`first` may be zero for a
    /// thread counted from birth): the span a thread's blocked time is measured over.
    first_read: Option<(Instant, SchedCounters)>,
    last_read_at: Option<Instant>,
}

/// The threads of one process, kept open and re-read like the sampler's other files.
pub(crate) struct Threads {
    pid: u32,
    by_tid: BTreeMap<u32, Thread>,
    /// Whether the process was born while sampling: its threads then count from birth.
    from_birth: bool,
}

impl Threads {
    pub(crate) fn new(pid: u32, from_birth: bool) -> Threads {
        Threads {
            pid,
            by_tid: BTreeMap::new(),
            from_birth,
        }
    }

    /// Look for threads not yet tracked (the sampler does this once a second: a thread born
    /// and ended between two looks is missed, and says so in the summary's docs).
    pub(crate) fn discover(&mut self, born_after_ticks: u64) {
        let Some(tasks) = i32::try_from(self.pid)
            .ok()
            .and_then(|pid| procfs::process::Process::new(pid).ok())
            .and_then(|p| p.tasks().ok())
        else {
            return;
        };
        for task in tasks.flatten() {
            let Ok(tid) = u32::try_from(task.tid) else {
                continue;
            };
            if self.by_tid.contains_key(&tid) {
                continue;
            }
            // Kept open and re-read each tick (`reread`): opening costs more than reading.
            let open =
                |name: &str| File::open(format!("/proc/{}/task/{tid}/{name}", self.pid)).ok();
            // A thread born while sampling counts from zero; an older one from now.
            let born_now = task.stat().is_ok_and(|s| s.starttime >= born_after_ticks);
            self.by_tid.insert(
                tid,
                Thread {
                    status: open("status"),
                    schedstat: open("schedstat"),
                    first: (self.from_birth || born_now).then(SchedCounters::default),
                    last: None,
                    first_read: None,
                    last_read_at: None,
                },
            );
        }
    }

    /// Re-read every tracked thread; an ended one keeps its last reading.
    pub(crate) fn read(&mut self, buf: &mut Vec<u8>) {
        for t in self.by_tid.values_mut() {
            let ctx = t
                .status
                .as_ref()
                .and_then(|f| reread(f, buf))
                .and_then(crate::sampler::parse_ctx_switches);
            let Some((voluntary, involuntary)) = ctx else {
                // Ended: no more readings, and its files can go.
                t.status = None;
                t.schedstat = None;
                continue;
            };
            let sched = t
                .schedstat
                .as_ref()
                .and_then(|f| reread(f, buf))
                .and_then(parse_schedstat);
            // Reaped between the two reads (an exiting program, a sampler preempted beside CPU
            // hogs): a reading of zeros would erase its on-CPU and run-queue time, so it ends
            // with its previous reading, as when its status stops answering.
            if t.schedstat.is_some() && sched.is_none() {
                t.status = None;
                t.schedstat = None;
                continue;
            }
            let now = SchedCounters {
                voluntary_ctx_switches: voluntary,
                involuntary_ctx_switches: involuntary,
                on_cpu_ns: sched.map_or(0, |s| s.0),
                run_queue_ns: sched.map_or(0, |s| s.1),
            };
            let at = Instant::now();
            t.first.get_or_insert(now);
            t.first_read.get_or_insert((at, now));
            t.last = Some(now);
            t.last_read_at = Some(at);
        }
    }

    /// The counters' growth over every thread seen, and whether schedstat was readable.
    pub(crate) fn total(&self) -> Option<(SchedCounters, bool)> {
        let mut sum = SchedCounters::default();
        let mut any = false;
        let mut schedstat = false;
        for t in self.by_tid.values() {
            if let (Some(first), Some(last)) = (t.first, t.last) {
                sum.add(last.since(first));
                any = true;
                schedstat |= last.on_cpu_ns > 0 || last.run_queue_ns > 0;
            }
        }
        any.then_some((sum, schedstat))
    }

    /// How long the thread-group leader (the main thread: a Python program's interpreter
    /// loop, where a rank waits for a collective) was neither on a CPU nor runnable between
    /// its first and latest readings, in seconds: blocked, waiting for something. Summing
    /// this over threads would count idle pool threads; a single thread's figure cannot
    /// exceed the window. None without schedstat or two readings.
    pub(crate) fn main_thread_blocked_s(&self) -> Option<f64> {
        let t = self.by_tid.get(&self.pid)?;
        let ((first_at, first), last_at, last) = (t.first_read?, t.last_read_at?, t.last?);
        if last.on_cpu_ns == 0 && last.run_queue_ns == 0 {
            return None;
        }
        let span_s = last_at.duration_since(first_at).as_secs_f64();
        let grew = last.since(first);
        let busy_s = (grew.on_cpu_ns + grew.run_queue_ns) as f64 / 1e9;
        (span_s > 0.0).then(|| (span_s - busy_s).max(0.0))
    }

    pub(crate) fn seen(&self) -> usize {
        self.by_tid.len()
    }
}

/// Re-read an open /proc file from offset 0 (procfs regenerates it on each read at 0).
pub(crate) fn reread<'b>(file: &File, buf: &'b mut Vec<u8>) -> Option<&'b str> {
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(_) => return None,
        }
    }
    std::str::from_utf8(&buf[..len]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_and_pss_fields() {
        assert_eq!(
            parse_schedstat("940556 2150129 1\n"),
            Some((940_556, 2_150_129))
        );
        assert_eq!(parse_schedstat("garbage"), None);
        // As this machine's kernel writes it.
        let rollup = "55869fe9b000-7fffe72bc000 ---p 00000000 00:00 0                          [rollup]\nRss:                10240 kB\nPss:                 4096 kB\nPss_Dirty:           112 kB\nPss_Anon:            112 kB\n";
        assert_eq!(parse_pss_bytes(rollup), Some(4096 * 1024));
        assert_eq!(parse_pss_bytes("Rss: 1 kB\n"), None);
    }

    #[test]
    fn a_thread_reaped_between_its_two_reads_keeps_its_last_reading() {
        let dir = tempfile::tempdir().unwrap();
        let status = dir.path().join("status");
        std::fs::write(
            &status,
            "voluntary_ctxt_switches:\t9\nnonvoluntary_ctxt_switches:\t4\n",
        )
        .unwrap();
        let before = SchedCounters {
            voluntary_ctx_switches: 8,
            involuntary_ctx_switches: 4,
            on_cpu_ns: 2_000_000_000,
            run_queue_ns: 3_000_000_000,
        };
        let mut threads = Threads::new(1, false);
        threads.by_tid.insert(
            1,
            Thread {
                status: File::open(&status).ok(),
                // A folder opens but never reads: the schedstat of a thread gone by then.
                schedstat: File::open(dir.path()).ok(),
                first: Some(SchedCounters::default()),
                last: Some(before),
                first_read: None,
                last_read_at: None,
            },
        );
        let mut buf = vec![0; 4096];
        threads.read(&mut buf);
        assert_eq!(threads.total(), Some((before, true)));
        // Ended: not read again.
        assert!(threads.by_tid[&1].status.is_none());
    }

    #[test]
    fn every_thread_of_a_threaded_process_is_counted() {
        // This test process: its threads' sum covers the spawned busy thread's CPU time,
        // which the leader's own counters do not.
        let pid = std::process::id();
        let mut threads = Threads::new(pid, false);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let busy = std::thread::spawn(move || {
            let mut x = 0u64;
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            x
        });
        let mut buf = vec![0u8; 4096];
        // Discovered after the thread started: it counts from the first reading.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        threads.discover(u64::MAX);
        threads.read(&mut buf);
        loop {
            std::thread::sleep(std::time::Duration::from_millis(50));
            threads.read(&mut buf);
            let (sum, schedstat) = threads.total().unwrap();
            if !schedstat || sum.on_cpu_ns > 100_000_000 || std::time::Instant::now() > deadline {
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.join().unwrap();
        assert!(threads.seen() >= 2, "{} threads", threads.seen());
        let (sum, schedstat) = threads.total().unwrap();
        assert_eq!(
            schedstat,
            std::path::Path::new("/proc/self/schedstat").exists()
        );
        if schedstat {
            assert!(sum.on_cpu_ns > 100_000_000, "{sum:?}");
        }
    }
}
