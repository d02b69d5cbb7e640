//! The /proc process table.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

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

/// Parse the text of /proc/<pid>/statm; `None` when it is not one. A zombie has no memory
/// map left and shows all zeros (`size_pages` 0).
pub fn parse_statm(text: &str) -> Option<StatmFields> {
    let mut fields = text.split_ascii_whitespace();
    Some(StatmFields {
        size_pages: fields.next()?.parse().ok()?,
        resident_pages: fields.next()?.parse().ok()?,
    })
}

/// Split /proc/<pid>/cmdline (NUL-separated, usually NUL-terminated) into argv. A process that
/// rewrote its title with spaces (setproctitle) shows as one argument.
pub fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The real uid of the `Uid:` line of /proc/<pid>/status.
fn parse_status_uid(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn proc_dir(pid: u32) -> PathBuf {
    Path::new("/proc").join(pid.to_string())
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
    fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Read one process from /proc/<pid> (stat, cmdline, comm, status); `None` when it is gone.
pub fn read_process(pid: u32) -> Option<ProcessSnapshot> {
    let dir = proc_dir(pid);
    let stat = parse_stat(&fs::read_to_string(dir.join("stat")).ok()?)?;
    let cmdline = parse_cmdline(&fs::read(dir.join("cmdline")).unwrap_or_default());
    let comm = fs::read_to_string(dir.join("comm"))
        .map(|c| c.trim_end_matches('\n').to_string())
        .unwrap_or_default();
    let uid = fs::read_to_string(dir.join("status"))
        .ok()
        .and_then(|s| parse_status_uid(&s))
        .unwrap_or(u32::MAX);
    Some(ProcessSnapshot {
        pid,
        ppid: stat.ppid,
        comm,
        state: stat.state,
        cmdline,
        uid,
        threads: stat.threads,
        utime_ticks: stat.utime_ticks,
        stime_ticks: stat.stime_ticks,
        start_ticks: stat.start_ticks,
        rss_bytes: stat.rss_pages * page_size(),
    })
}

/// /proc/<pid>/exe (the program's path; needs ptrace-read access, so often absent for other
/// users' processes).
pub fn exe(pid: u32) -> Option<PathBuf> {
    fs::read_link(proc_dir(pid).join("exe")).ok()
}

/// /proc/<pid>/cwd (same access rule as `exe`).
pub fn cwd(pid: u32) -> Option<PathBuf> {
    fs::read_link(proc_dir(pid).join("cwd")).ok()
}

/// Paths of the shared objects in /proc/<pid>/maps whose file name starts with `prefix`
/// (`libpython`), deduplicated in order.
pub fn mapped_libraries(pid: u32, prefix: &str) -> Vec<String> {
    let Ok(maps) = fs::read_to_string(proc_dir(pid).join("maps")) else {
        return Vec::new();
    };
    let mut found: Vec<String> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.starts_with(prefix) && !found.iter().any(|f| f == path) {
            found.push(path.to_string());
        }
    }
    found
}

/// Every process readable now, in PID order. Processes that exit while being read are left
/// out.
pub fn list_processes() -> Vec<ProcessSnapshot> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    pids.into_iter().filter_map(read_process).collect()
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

/// Inodes of the TCP sockets listening on `port`, from /proc/net/tcp and /proc/net/tcp6
/// (state `0A` is LISTEN; the local port is hexadecimal after the address's colon).
pub fn listening_inodes(port: u16) -> Vec<u64> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else {
            continue;
        };
        out.extend(parse_listening(&text, port));
    }
    out
}

/// The inodes of `port`'s LISTEN rows in the text of /proc/net/tcp{,6}.
pub fn parse_listening(text: &str, port: u16) -> Vec<u64> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit(':').next()?;
            let listening = *f.get(3)? == "0A";
            (listening && u16::from_str_radix(local_port, 16).ok()? == port)
                .then(|| f.get(9)?.parse().ok())
                .flatten()
        })
        .collect()
}

/// The socket inodes a process holds open, from the `socket:[inode]` links in
/// /proc/<pid>/fd (readable for one's own processes, or with CAP_SYS_PTRACE).
pub fn socket_inodes(pid: u32) -> Vec<u64> {
    let Ok(fds) = fs::read_dir(proc_dir(pid).join("fd")) else {
        return Vec::new();
    };
    fds.filter_map(|e| {
        let link = fs::read_link(e.ok()?.path()).ok()?;
        let s = link.to_str()?;
        s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
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
    fn cmdline_splits_at_nuls() {
        assert_eq!(
            parse_cmdline(b"python3\0train.py\0--lr\0\0"),
            vec!["python3", "train.py", "--lr", ""]
        );
        assert_eq!(parse_cmdline(b"VLLM::EngineCore"), vec!["VLLM::EngineCore"]);
        assert!(parse_cmdline(b"").is_empty());
    }

    #[test]
    fn listening_rows_are_found_by_port() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 123456 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(parse_listening(text, 8080), vec![123456]);
        assert!(parse_listening(text, 8081).is_empty());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let inodes = listening_inodes(port);
        assert_eq!(inodes.len(), 1);
        assert!(socket_inodes(std::process::id()).contains(&inodes[0]));
    }

    #[test]
    fn reads_itself_and_its_child() {
        let me = read_process(std::process::id()).unwrap();
        assert!(me.threads >= 1);
        assert!(me.rss_bytes > 0);
        assert!(!me.cmdline.is_empty());
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
        assert!(exe(child.id()).unwrap().to_string_lossy().contains("sleep"));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(read_process(child.id()), None);
    }
}
