//! The /proc process table.

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

/// One process as /proc shows it at the moment of reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessSnapshot {
    pub pid: u32,
    pub ppid: u32,
    /// /proc/<pid>/comm (at most 15 bytes; the kernel truncates).
    pub comm: String,
    /// State letter of /proc/<pid>/stat (R, S, D, Z, T, ...).
    pub state: char,
    /// /proc/<pid>/cmdline split at NULs; empty for kernel threads and zombies.
    pub cmdline: Vec<String>,
    /// Real uid from /proc/<pid>/status.
    pub uid: u32,
    /// Threads (field 20 of /proc/<pid>/stat).
    pub threads: u32,
    /// User and system CPU time, in clock ticks (fields 14 and 15 of /proc/<pid>/stat).
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// Start time after boot, in clock ticks (field 22 of /proc/<pid>/stat).
    pub start_ticks: u64,
    /// Resident set, in bytes (field 24 of /proc/<pid>/stat, in pages, times the page size).
    pub rss_bytes: u64,
}

/// The numbers of /proc/<pid>/stat this crate uses. The comm field is in parentheses and may
/// itself hold spaces and parentheses, so the fields are counted from the last `)`.
///
/// Read by hand, not through `procfs`, on one path only: the sampler re-reads the files it keeps
/// open (`read_at` into one buffer) for every process on every detail tick, where
/// `procfs::process::Stat::from_read` costs several times more (it parses all 52 fields and
/// allocates the name): `cargo run --release -p system-profile-sample --example stat_parse`,
/// BENCHMARKS.md "Reading /proc". Everything else reads /proc through `procfs`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatFields {
    pub state: char,
    pub ppid: u32,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    pub threads: u32,
    pub start_ticks: u64,
    pub rss_pages: u64,
}

/// Parse the text of /proc/<pid>/stat; `None` when it is not one.
pub fn parse_stat(text: &str) -> Option<StatFields> {
    let close = text.rfind(')')?;
    // Field 3 (state) is the first after the `)`; walk the rest once, without collecting
    // (this runs for every process on every detail tick of the sampler).
    let mut rest = text.get(close + 1..)?.split_ascii_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?; // 4
    let mut rest = rest.skip(9); // 5..=13
    let utime_ticks = rest.next()?.parse().ok()?; // 14
    let stime_ticks = rest.next()?.parse().ok()?; // 15
    let mut rest = rest.skip(4); // 16..=19
    let threads = rest.next()?.parse().ok()?; // 20
    let start_ticks = rest.nth(1)?.parse().ok()?; // 22
    let rss_pages = rest.nth(1)?.parse().ok()?; // 24
    Some(StatFields {
        state,
        ppid,
        utime_ticks,
        stime_ticks,
        threads,
        start_ticks,
        rss_pages,
    })
}

/// The command name in the text of /proc/<pid>/stat (between the first `(` and the last `)`:
/// the name itself may hold parentheses).
pub fn stat_comm(text: &str) -> Option<&str> {
    text.get(text.find('(')? + 1..text.rfind(')')?)
}

/// The sizes of /proc/<pid>/statm this crate uses, in pages. statm costs a tenth of stat to
/// read (no thread walk, no formatting of 52 fields), which is why the sampler reads it on
/// every tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatmFields {
    /// Total program size (first field), in pages.
    pub size_pages: u64,
    /// Resident set (second field), in pages.
    pub resident_pages: u64,
}

/// Parse the text of /proc/<pid>/statm with `procfs`; `None` when it is not one. A zombie has
/// no memory map left and shows all zeros (`size_pages` 0). (~80 ns: small beside the read
/// itself.)
pub fn parse_statm(text: &str) -> Option<StatmFields> {
    use procfs::FromRead;
    let m = procfs::process::StatM::from_read(text.as_bytes()).ok()?;
    Some(StatmFields {
        size_pages: m.size,
        resident_pages: m.resident,
    })
}

/// Bytes per page (sysconf), for RSS.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// Clock ticks per second (sysconf `_SC_CLK_TCK`), for the tick fields.
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 {
        n as u64
    } else {
        100
    }
}

/// Seconds since boot, from /proc/uptime.
pub fn uptime_s() -> Option<f64> {
    use procfs::Current;
    procfs::Uptime::current().ok().map(|u| u.uptime)
}

/// Read one process from /proc/<pid> (stat, cmdline, status) through `procfs`; `None` when it
/// is gone.
pub fn read_process(pid: u32) -> Option<ProcessSnapshot> {
    let process = procfs::process::Process::new(i32::try_from(pid).ok()?).ok()?;
    snapshot(&process)
}

fn snapshot(process: &procfs::process::Process) -> Option<ProcessSnapshot> {
    let stat = process.stat().ok()?;
    Some(ProcessSnapshot {
        pid: u32::try_from(stat.pid).ok()?,
        ppid: u32::try_from(stat.ppid).unwrap_or(0),
        comm: stat.comm.clone(),
        state: stat.state,
        // A kernel thread or a zombie has none; one being torn down may refuse it.
        cmdline: process.cmdline().unwrap_or_default(),
        uid: process.status().map_or(u32::MAX, |s| s.ruid),
        threads: u32::try_from(stat.num_threads).unwrap_or(0),
        utime_ticks: stat.utime,
        stime_ticks: stat.stime,
        start_ticks: stat.starttime,
        rss_bytes: stat.rss * page_size(),
    })
}

fn process(pid: u32) -> Option<procfs::process::Process> {
    procfs::process::Process::new(i32::try_from(pid).ok()?).ok()
}

/// /proc/<pid>/cmdline as argv; `None` when the process is gone.
pub fn cmdline(pid: u32) -> Option<Vec<String>> {
    process(pid)?.cmdline().ok()
}

/// /proc/<pid>/environ as variable → value (non-UTF-8 bytes replaced); empty when the
/// process is gone or not ours to read.
pub fn environ(pid: u32) -> HashMap<String, String> {
    process(pid)
        .and_then(|p| p.environ().ok())
        .map(|vars| {
            vars.into_iter()
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether /proc/<pid> exists (a zombie still does).
pub fn exists(pid: u32) -> bool {
    process(pid).is_some()
}

/// The PIDs in /proc now.
pub fn pids() -> Vec<u32> {
    procfs::process::all_processes()
        .map(|all| {
            all.filter_map(|p| u32::try_from(p.ok()?.pid).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Paths of every file /proc/<pid>/maps maps, in order, deduplicated.
pub fn mapped_files(pid: u32) -> Vec<PathBuf> {
    let Some(maps) = process(pid).and_then(|p| p.maps().ok()) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = Vec::new();
    for map in maps {
        if let procfs::process::MMapPath::Path(path) = map.pathname {
            if !found.contains(&path) {
                found.push(path);
            }
        }
    }
    found
}

/// /proc/<pid>/exe (the program's path; needs ptrace-read access, so often absent for other
/// users' processes).
pub fn exe(pid: u32) -> Option<PathBuf> {
    process(pid)?.exe().ok()
}

/// /proc/<pid>/cwd (same access rule as `exe`).
pub fn cwd(pid: u32) -> Option<PathBuf> {
    process(pid)?.cwd().ok()
}

/// Paths of the shared objects in /proc/<pid>/maps whose file name starts with `prefix`
/// (`libpython`), deduplicated in order.
pub fn mapped_libraries(pid: u32, prefix: &str) -> Vec<String> {
    mapped_files(pid)
        .into_iter()
        .filter(|path| {
            path.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .map(|path| path.to_string_lossy().into_owned())
        .collect()
}

/// Every process readable now, in PID order. Processes that exit while being read are left
/// out.
pub fn list_processes() -> Vec<ProcessSnapshot> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let mut table: Vec<ProcessSnapshot> = all.filter_map(|p| snapshot(&p.ok()?)).collect();
    table.sort_unstable_by_key(|p| p.pid);
    table
}

/// Parent → children, over a table.
pub fn children_map(table: &[ProcessSnapshot]) -> HashMap<u32, Vec<u32>> {
    let mut map: HashMap<u32, Vec<u32>> = HashMap::new();
    for p in table {
        map.entry(p.ppid).or_default().push(p.pid);
    }
    map
}

/// `pid` and all its descendants in the table, parents before children.
pub fn tree(table: &[ProcessSnapshot], pid: u32) -> Vec<u32> {
    let children = children_map(table);
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        if let Some(kids) = children.get(&parent) {
            out.extend(kids.iter().copied().filter(|k| *k != parent));
        }
        i += 1;
    }
    out
}

/// Inodes of the TCP sockets listening on `port`, from /proc/net/tcp and /proc/net/tcp6.
pub fn listening_inodes(port: u16) -> Vec<u64> {
    [procfs::net::tcp(), procfs::net::tcp6()]
        .into_iter()
        .flat_map(Result::unwrap_or_default)
        .filter(|e| e.state == procfs::net::TcpState::Listen && e.local_address.port() == port)
        .map(|e| e.inode)
        .collect()
}

/// The TCP addresses a process listens on (its own sockets among /proc/net/tcp{,6}'s listeners),
/// lowest port first: where a server of its own answers.
pub fn listening_addresses(pid: u32) -> Vec<std::net::SocketAddr> {
    let mine = socket_inodes(pid);
    let mut out: Vec<std::net::SocketAddr> = [procfs::net::tcp(), procfs::net::tcp6()]
        .into_iter()
        .flat_map(Result::unwrap_or_default)
        .filter(|e| e.state == procfs::net::TcpState::Listen && mine.contains(&e.inode))
        .map(|e| e.local_address)
        .collect();
    out.sort_by_key(|a| (a.port(), a.is_ipv6()));
    out.dedup();
    out
}

/// The socket inodes a process holds open, from the `socket:[inode]` links in
/// /proc/<pid>/fd (readable for one's own processes, or with CAP_SYS_PTRACE).
pub fn socket_inodes(pid: u32) -> Vec<u64> {
    let Some(fds) = process(pid).and_then(|p| p.fd().ok()) else {
        return Vec::new();
    };
    fds.filter_map(|fd| match fd.ok()?.target {
        procfs::process::FDTarget::Socket(inode) => Some(inode),
        _ => None,
    })
    .collect()
}

/// User names by uid, from /etc/passwd.
pub fn user_names() -> HashMap<u32, String> {
    let Ok(text) = fs::read_to_string("/etc/passwd") else {
        return HashMap::new();
    };
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let uid = f.nth(1)?.parse().ok()?;
            Some((uid, name.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parens_in_comm() {
        let text = "4121 (python3 (x) y) S 1 4121 4121 0 -1 4194560 2470 0 0 0 \
                    55 12 0 0 20 0 3 0 987654 12345678 2048 18446744073709551615";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.utime_ticks, 55);
        assert_eq!(s.stime_ticks, 12);
        assert_eq!(s.threads, 3);
        assert_eq!(s.start_ticks, 987654);
        assert_eq!(s.rss_pages, 2048);
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S"), None);
        assert_eq!(
            parse_statm("5342 1201 806 1 0 364 0\n"),
            Some(StatmFields {
                size_pages: 5342,
                resident_pages: 1201
            })
        );
        assert_eq!(
            parse_statm("0 0 0 0 0 0 0\n").map(|m| m.size_pages),
            Some(0)
        );
        assert_eq!(parse_statm("x"), None);
    }

    #[test]
    fn stat_comm_keeps_parentheses_in_the_name() {
        assert_eq!(stat_comm("42 (a (b) c) S 1 2"), Some("a (b) c"));
        assert_eq!(stat_comm("42 python3 S"), None);
    }

    #[test]
    fn a_listening_socket_is_found_by_port_and_owner() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let inodes = listening_inodes(port);
        assert_eq!(inodes.len(), 1);
        assert!(socket_inodes(std::process::id()).contains(&inodes[0]));
        // A connected socket to it is not listening.
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        assert_eq!(listening_inodes(port), inodes);
    }

    #[test]
    fn reads_itself_and_its_child() {
        let me = read_process(std::process::id()).unwrap();
        assert!(me.threads >= 1);
        assert!(me.rss_bytes > 0);
        assert!(!me.cmdline.is_empty());
        // SAFETY: getuid has no preconditions.
        assert_eq!(me.uid, unsafe { libc::getuid() });
        assert!(
            mapped_libraries(me.pid, "libc")
                .iter()
                .any(|l| l.contains("libc")),
            "{:?}",
            mapped_libraries(me.pid, "libc")
        );
        assert!(uptime_s().unwrap() > 0.0);
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let table = list_processes();
        let t = tree(&table, std::process::id());
        assert!(t.contains(&child.id()), "{t:?}");
        let c = table.iter().find(|p| p.pid == child.id()).unwrap();
        assert_eq!(c.ppid, std::process::id());
        assert_eq!(c.cmdline, vec!["sleep", "30"]);
        assert_eq!(c.comm, "sleep");
        assert!(exe(child.id()).unwrap().to_string_lossy().contains("sleep"));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(read_process(child.id()), None);
    }
}
