//! Samples that are waiting, not working. A sampling profiler that keeps a thread's stack
//! while it blocks in a socket read, a select, a lock or a sleep shows the function around
//! that call as "hot"; speeding it up would change nothing. A hotspot is called waiting when
//! its frame is one of the standard library's blocking wrappers, or when the line it was
//! sampled on calls a blocking primitive; such a row is kind `waiting` and names the call,
//! and no rule advises making it faster.

use system_profile_model::report::HotspotTable;

/// Standard-library functions that block, by the file they are defined in.
const BLOCKING_FRAMES: &[(&str, &[&str])] = &[
    (
        "socket.py",
        &[
            "accept",
            "readinto",
            "recv",
            "recv_into",
            "sendall",
            "create_connection",
        ],
    ),
    (
        "ssl.py",
        &["read", "recv", "recv_into", "do_handshake", "accept"],
    ),
    ("selectors.py", &["select"]),
    (
        "threading.py",
        &["wait", "join", "_wait_for_tstate_lock", "acquire"],
    ),
    ("queue.py", &["get", "put", "join"]),
    (
        "subprocess.py",
        &["wait", "_wait", "_try_wait", "communicate", "_communicate"],
    ),
    (
        "connection.py",
        &["recv", "_recv", "_recv_bytes", "poll", "_poll", "wait"],
    ),
    ("_base.py", &["result", "wait", "as_completed"]),
    ("pool.py", &["wait", "get"]),
    ("time.py", &["sleep"]),
];

/// Calls that block, as they appear on a line of source: the needle and the name shown.
const BLOCKING_CALLS: &[(&str, &str)] = &[
    (".recv(", "recv"),
    (".recv_into(", "recv_into"),
    (".recvfrom(", "recvfrom"),
    (".accept(", "accept"),
    (".sendall(", "sendall"),
    ("select.select(", "select"),
    (".select(", "select"),
    (".poll(", "poll"),
    ("time.sleep(", "sleep"),
    ("sleep(", "sleep"),
    (".wait(", "wait"),
    (".join(", "join"),
    (".acquire(", "acquire"),
    ("urlopen(", "urlopen"),
    (".communicate(", "communicate"),
    (".result(", "result"),
    // A database commit waits for the disk (fsync) or the server.
    (".commit(", "commit"),
    // A thread that yields its CPU in a loop is polling for work (vLLM's engine and workers on
    // their shared-memory queue): waiting, however much CPU the spin burns.
    ("sched_yield(", "sched_yield"),
    // A pool's worker taking its next item, and ZeroMQ's poll, block in C.
    (".get(block=True", "get"),
    ("zmq_poll(", "poll"),
];

/// The blocking call a frame is, from its file and function.
pub fn blocking_frame(file: &str, function: &str) -> Option<&'static str> {
    let base = file.rsplit('/').next().unwrap_or(file);
    let name = function.rsplit('.').next().unwrap_or(function);
    BLOCKING_FRAMES
        .iter()
        .find(|(f, _)| *f == base)
        .and_then(|(_, names)| names.iter().find(|n| **n == name).copied())
        // A standard-library file only: site-packages has its own `socket.py`s.
        .filter(|_| !file.contains("-packages/"))
}

/// The blocking call a line of source makes, if any. `"".join(...)` and `os.path.join` are
/// string and path work, not a thread join.
pub fn blocking_call(line: &str) -> Option<&'static str> {
    let code = line.split('#').next().unwrap_or(line);
    // `with LOCK:` acquires it: a thread sampled there waits for the lock.
    if let Some(expr) = code.trim_start().strip_prefix("with ") {
        let expr = expr.to_ascii_lowercase();
        if ["lock", "mutex", "semaphore", "cond"]
            .iter()
            .any(|w| expr.split(" as ").next().unwrap_or("").contains(w))
        {
            return Some("acquire");
        }
    }
    BLOCKING_CALLS
        .iter()
        .find(|(needle, _)| {
            code.contains(needle)
                && !(*needle == ".join("
                    && (code.contains("\".join(")
                        || code.contains("'.join(")
                        || code.contains("path.join(")))
        })
        .map(|(_, name)| *name)
}

/// Mark the waiting rows of a hotspot table. `read_line(file, line)` gives a line of source
/// (the caller does the reading, and decides which files it may read).
pub fn classify(table: &mut HotspotTable, read_line: &dyn Fn(&str, u32) -> Option<String>) {
    for h in table.rows.iter_mut().filter(|h| h.kind == "python") {
        let Some(file) = h.file.clone() else {
            continue;
        };
        let by_frame = blocking_frame(&file, &h.function);
        let by_line = || {
            let mut lines: Vec<u32> = h.evidence.iter().filter_map(|e| e.hot_line).collect();
            lines.extend(h.line);
            lines
                .into_iter()
                .find_map(|l| read_line(&file, l).as_deref().and_then(blocking_call))
        };
        if let Some(call) = by_frame.or_else(by_line) {
            h.kind = "waiting".into();
            h.waits_in = Some(call.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_frames_and_lines_are_recognised_and_string_work_is_not() {
        assert_eq!(
            blocking_frame("/usr/lib/python3.11/socket.py", "SocketIO.readinto"),
            Some("readinto")
        );
        assert_eq!(
            blocking_frame("/usr/lib/python3.11/selectors.py", "EpollSelector.select"),
            Some("select")
        );
        assert_eq!(
            blocking_frame("/x/site-packages/foo/socket.py", "recv"),
            None
        );
        assert_eq!(blocking_frame("app.py", "render_page"), None);
        assert_eq!(
            blocking_call("        data = sock.recv(1024)"),
            Some("recv")
        );
        assert_eq!(blocking_call("    time.sleep(0.1)"), Some("sleep"));
        assert_eq!(
            blocking_call("    with lock: lock.acquire()"),
            Some("acquire")
        );
        assert_eq!(blocking_call("    s = \", \".join(parts)"), None);
        assert_eq!(blocking_call("    p = os.path.join(a, b)"), None);
        assert_eq!(blocking_call("    total += x * x  # no sleep() here"), None);
        assert_eq!(blocking_call("    out.append(render(x))"), None);
        assert_eq!(blocking_call("        db.commit()"), Some("commit"));
        assert_eq!(blocking_call("    with LOCK:"), Some("acquire"));
        assert_eq!(blocking_call("    with self._cond as c:"), Some("acquire"));
        assert_eq!(blocking_call("    with open(path) as f:"), None);
    }
}
