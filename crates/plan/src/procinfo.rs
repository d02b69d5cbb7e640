//! Running processes as the target sees them: /proc snapshots turned into `ProcessInfo` (user,
//! exe, Python or not, which script), and matched against names and recipe components.

use crate::identify::Machine;
use std::collections::HashMap;
use system_profile_model::recipe::Recipe;
use system_profile_model::target::ProcessInfo;
use system_profile_sample::proc::{self as procfs, ProcessSnapshot};

/// The process table read once for one identification, without this server and its children.
pub struct Table {
    pub processes: Vec<ProcessSnapshot>,
    users: HashMap<u32, String>,
    uptime_s: f64,
    ticks: f64,
}

impl Table {
    /// This machine's table (what `identify::Live` answers).
    pub fn read() -> Table {
        let all = procfs::list_processes();
        // The server and the probes it runs would match every name the user types.
        let own = procfs::tree(&all, std::process::id());
        let processes = all
            .into_iter()
            .filter(|p| !own.contains(&p.pid) && p.state != 'Z' && !p.cmdline.is_empty())
            .collect();
        Table {
            processes,
            users: procfs::user_names(),
            uptime_s: procfs::uptime_s().unwrap_or(0.0),
            ticks: procfs::ticks_per_second() as f64,
        }
    }

    /// A table from processes already read (a machine made of plain data).
    pub fn of(processes: Vec<ProcessSnapshot>, users: HashMap<u32, String>) -> Table {
        Table {
            processes,
            users,
            uptime_s: 0.0,
            ticks: 100.0,
        }
    }

    pub fn get(&self, pid: u32) -> Option<&ProcessSnapshot> {
        self.processes.iter().find(|p| p.pid == pid)
    }

    /// `pid` and its descendants, parents first.
    pub fn tree(&self, pid: u32) -> Vec<u32> {
        procfs::tree(&self.processes, pid)
    }

    /// The process as the wire shows it (exe, cwd and maps read now; they need the same
    /// access as ptrace, so other users' processes may lack them).
    pub fn info(&self, mach: &dyn Machine, snap: &ProcessSnapshot) -> ProcessInfo {
        let exe = mach.exe(snap.pid).map(|p| p.to_string_lossy().into_owned());
        let exe_name = exe
            .as_deref()
            .map(|e| e.rsplit('/').next().unwrap_or(e).to_string())
            .unwrap_or_default();
        let mut python_version = python_version_of_name(&exe_name);
        let mut is_python = python_version.is_some() || is_python_name(&exe_name);
        if !is_python || python_version.is_none() {
            let libpython = mach.mapped_files(snap.pid).into_iter().find_map(|l| {
                let name = l.file_name()?.to_string_lossy().into_owned();
                name.starts_with("libpython")
                    .then(|| python_version_of_name(name.trim_start_matches("lib")))
                    .flatten()
            });
            if let Some(v) = libpython {
                is_python = true;
                python_version = Some(v);
            }
        }
        if exe.is_none() && !is_python {
            // Without exe access, argv[0] is the best evidence left.
            let argv0 = snap.cmdline.first().map(String::as_str).unwrap_or("");
            let name = argv0.rsplit('/').next().unwrap_or(argv0);
            is_python = is_python_name(name) || python_version_of_name(name).is_some();
            python_version = python_version_of_name(name);
        }
        ProcessInfo {
            pid: snap.pid,
            ppid: snap.ppid,
            name: snap.comm.clone(),
            cmdline: snap.cmdline.clone(),
            exe,
            cwd: mach
                .cwd_of(snap.pid)
                .map(|p| p.to_string_lossy().into_owned()),
            uid: snap.uid,
            user: self.users.get(&snap.uid).cloned(),
            state: snap.state.to_string(),
            threads: snap.threads,
            rss_bytes: snap.rss_bytes,
            elapsed_s: (self.uptime_s - snap.start_ticks as f64 / self.ticks).max(0.0),
            children: self
                .processes
                .iter()
                .filter(|p| p.ppid == snap.pid)
                .map(|p| p.pid)
                .collect(),
            is_python,
            python_version,
            python_entry: if is_python {
                python_entry(&snap.cmdline)
            } else {
                None
            },
            role: None,
        }
    }

    /// Processes whose name, program or arguments contain `word` (case-insensitive): the
    /// kernel name, argv[0]'s file name, or any argument's last path component.
    pub fn matching_name(&self, word: &str) -> Vec<&ProcessSnapshot> {
        let w = word.to_lowercase();
        self.processes
            .iter()
            .filter(|p| {
                p.comm.to_lowercase().contains(&w)
                    || p.cmdline.iter().any(|a| {
                        let base = a.trim_end_matches('/').rsplit('/').next().unwrap_or(a);
                        base.to_lowercase().contains(&w)
                    })
            })
            .collect()
    }

    /// Processes of each component of `recipe`, in component order (a process plays the first
    /// component it matches).
    pub fn components(&self, recipe: &Recipe) -> Vec<(String, Vec<u32>)> {
        let mut taken: Vec<u32> = Vec::new();
        let mut out: Vec<(String, Vec<u32>)> = Vec::new();
        for c in &recipe.components {
            let patterns: Vec<String> = c.cmdline.iter().map(|s| s.to_lowercase()).collect();
            let mut pids: Vec<u32> = self
                .processes
                .iter()
                .filter(|p| !taken.contains(&p.pid))
                .filter(|p| {
                    let line = p.cmdline.join(" ").to_lowercase();
                    patterns.iter().any(|pat| line.contains(pat.as_str()))
                })
                .map(|p| p.pid)
                .collect();
            if let Some(parent) = &c.children_of {
                if let Some((_, parents)) = out.iter().find(|(n, _)| n == parent) {
                    pids.extend(
                        self.processes
                            .iter()
                            .filter(|p| parents.contains(&p.ppid) && !taken.contains(&p.pid))
                            .map(|p| p.pid),
                    );
                }
            }
            pids.sort_unstable();
            pids.dedup();
            taken.extend(&pids);
            out.push((c.name.clone(), pids));
        }
        out
    }

    /// Of `pids`, those whose parent is not among them: one per independent tree.
    pub fn roots(&self, pids: &[u32]) -> Vec<u32> {
        pids.iter()
            .copied()
            .filter(|pid| {
                self.get(*pid)
                    .is_none_or(|p| !self.ancestors(p.pid).iter().any(|a| pids.contains(a)))
            })
            .collect()
    }

    fn ancestors(&self, pid: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut cur = self.get(pid).map(|p| p.ppid);
        while let Some(pp) = cur {
            if pp == 0 || out.contains(&pp) {
                break;
            }
            out.push(pp);
            cur = self.get(pp).map(|p| p.ppid);
        }
        out
    }
}

fn is_python_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "python" || n == "python3" || n.starts_with("pypy")
}

/// `python3.11` → `3.11`; `libpython3.12.so.1.0` (with `lib` trimmed) → `3.12`.
pub fn python_version_of_name(name: &str) -> Option<String> {
    let rest = name.strip_prefix("python")?;
    let v: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    // major.minor only: `libpython3.12.so.1.0` carries the soname's own numbers after it.
    let parts: Vec<&str> = v.split('.').take(2).collect();
    (parts.len() == 2 && parts.iter().all(|p| !p.is_empty())).then(|| parts.join("."))
}

/// The script or `-m module` a Python command line runs (interpreter options skipped).
pub fn python_entry(cmdline: &[String]) -> Option<String> {
    let mut args = cmdline.iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-m" => return args.next().map(|m| format!("-m {m}")),
            "-c" => return Some("-c".into()),
            "-X" | "-W" | "--check-hash-based-pycs" => {
                args.next();
            }
            s if s.starts_with("-m") && s.len() > 2 => return Some(format!("-m {}", &s[2..])),
            s if s.starts_with('-') => {}
            s => return Some(s.to_string()),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_names_and_entries() {
        assert_eq!(python_version_of_name("python3.11"), Some("3.11".into()));
        assert_eq!(
            python_version_of_name("python3.12.so.1.0"),
            Some("3.12".into())
        );
        assert_eq!(python_version_of_name("python3"), None);
        assert_eq!(python_version_of_name("bash"), None);
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            python_entry(&argv("python3 -u -X dev train.py --lr 1")),
            Some("train.py".into())
        );
        assert_eq!(
            python_entry(&argv(
                "python -m vllm.entrypoints.openai.api_server --model m"
            )),
            Some("-m vllm.entrypoints.openai.api_server".into())
        );
        assert_eq!(python_entry(&argv("python3")), None);
    }
}
