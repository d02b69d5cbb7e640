//! Attacks on the real binary (issue: no web page, profiled program or crafted input can make
//! the server run, read or write what the user did not ask for). Each test asserts that
//! nothing ran, nothing outside the root changed or came back, and no child outlived its
//! server.

use crate::listen::{http_raw, listen, listen_with, ws_frame, ws_read_text};
use crate::util::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

fn run_touch(marker: &Path) -> String {
    json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_profiler",
        "arguments":{"profiler":"custom","target":{"command":["touch", marker]}}}})
    .to_string()
}

/// The handshake's status line, sent with `headers`.
fn ws_upgrade(addr: std::net::SocketAddr, headers: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = format!(
        "GET / HTTP/1.1\r\n{headers}Upgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    (stream, String::from_utf8_lossy(&head).into_owned())
}

#[test]
fn a_web_page_cannot_drive_the_listener() {
    let l = listen();
    let marker = l.root.path().join("pwned");
    let token = format!("Authorization: Bearer {}\r\n", l.token);
    // The token file is the user's alone.
    let token_file = l.root.path().join("profile_output/.listen-token");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", token_file.display());
    assert_eq!(
        std::fs::read_to_string(&token_file).unwrap().trim(),
        l.token
    );
    let host = format!("Host: {}\r\n", l.addr);
    let cases = [
        // A page's WebSocket: the browser sends its Origin (and cannot send our token).
        (
            format!("{host}Origin: http://evil.example\r\n{token}"),
            403,
            "Origin",
        ),
        // DNS rebinding: the page's own name as Host.
        (
            format!("Host: evil.example:{}\r\n{token}", l.addr.port()),
            403,
            "Host",
        ),
        // No token, or a wrong one.
        (host.clone(), 401, "bearer token"),
        (
            format!("{host}Authorization: Bearer 0000\r\n"),
            401,
            "bearer token",
        ),
    ];
    for (headers, status, says) in &cases {
        let (code, body) = http_raw(l.addr, headers, &run_touch(&marker));
        assert_eq!(code, *status, "POST with {headers:?}: {body}");
        assert!(body.contains(says), "POST with {headers:?}: {body}");
        let (_, head) = ws_upgrade(l.addr, headers);
        assert!(
            head.starts_with(&format!("HTTP/1.1 {status}")),
            "upgrade with {headers:?}: {head}"
        );
    }
    // Nothing ran; then the same call with the token and no Origin does run.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!marker.exists(), "a refused request ran its command");
    let (stream, head) = ws_upgrade(l.addr, &format!("{host}{token}"));
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let mut stream = stream;
    stream.write_all(&ws_frame(&run_touch(&marker))).unwrap();
    let r: Value = serde_json::from_str(&ws_read_text(&mut stream)).unwrap();
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(marker.exists(), "the allowed call ran");
    // The token is no resource.
    let (_, body) = http_raw(
        l.addr,
        &format!("{host}{token}"),
        &json!({"jsonrpc":"2.0","id":9,"method":"resources/read",
                "params":{"uri": format!("file://{}", token_file.display())}})
        .to_string(),
    );
    assert!(!body.contains(&l.token), "{body}");
}

#[test]
fn origins_and_no_auth_need_the_users_word() {
    let l = listen_with(&["--allow-origin", "http://localhost:3000"]);
    let ok = format!(
        "Host: localhost:{}\r\nOrigin: http://localhost:3000\r\nAuthorization: Bearer {}\r\n",
        l.addr.port(),
        l.token
    );
    let (code, body) = http_raw(l.addr, &ok, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_eq!(code, 200, "{body}");
    // --no-auth alone is refused: it needs a reason.
    let out = std::process::Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--no-auth"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--no-auth-reason"), "{stderr}");
    let open = listen_with(&["--no-auth", "--no-auth-reason", "a test namespace"]);
    let (code, body) = http_raw(
        open.addr,
        &format!("Host: {}\r\n", open.addr),
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_eq!(code, 200, "{body}");
    // Without the token, the browser checks still hold.
    let (code, _) = http_raw(
        open.addr,
        &format!("Host: {}\r\nOrigin: http://evil.example\r\n", open.addr),
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_eq!(code, 403);
}

fn call(server: &mut Server, id: u64, name: &str, arguments: Value) -> Value {
    server.ask(
        &json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                "params":{"name":name,"arguments":arguments}})
        .to_string(),
    )
}

fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.display().to_string(),
                    std::fs::read(&p).unwrap_or_default(),
                ));
            }
        }
    }
    out.sort();
    out
}

/// A root and a folder beside it (outside the root), both made.
fn root_and_elsewhere() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let top = tempfile::tempdir().unwrap();
    let (root, elsewhere) = (top.path().join("root"), top.path().join("elsewhere"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    (top, root, elsewhere)
}

#[test]
fn a_symlinked_session_is_neither_read_nor_written() {
    let (_top, root, elsewhere) = root_and_elsewhere();
    std::fs::create_dir_all(root.join("profile_output")).unwrap();
    std::fs::create_dir_all(elsewhere.join("s")).unwrap();
    let manifest = json!({"session":"20260101-000000-1","dir":"x","runs":[
        {"run_id":"r001-measure","session":"20260101-000000-1","profiler":"measure",
         "status":"completed","target":{"command":["OUTSIDE-SECRET"]},"argv":[],"cwd":"/",
         "env":{},"started_at_unix_s":1.0,"dir":"x","artifacts":[],"metrics":{},
         "stdout_tail":"OUTSIDE-SECRET","stderr_tail":"","warnings":[]}]});
    std::fs::write(
        elsewhere.join("s/manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        elsewhere.join("s"),
        root.join("profile_output/20260101-000000-1"),
    )
    .unwrap();
    let before = snapshot(&elsewhere);
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::spawn_in(dir, &root, &[], &[]);
    for (id, tool, args) in [
        (1, "summarize", json!({"session":"20260101-000000-1"})),
        (
            2,
            "compare",
            json!({"before":{"session":"20260101-000000-1"},"after":{"session":"20260101-000000-1"}}),
        ),
    ] {
        let r = call(&mut server, id, tool, args);
        let text = r.to_string();
        assert!(!text.contains("OUTSIDE-SECRET"), "{tool}: {text}");
        assert!(
            r["error"].is_object() || r["result"]["isError"] == true,
            "{tool} must refuse: {text}"
        );
    }
    assert_eq!(
        snapshot(&elsewhere),
        before,
        "something was written outside"
    );
}

#[test]
fn a_run_folder_placed_as_a_symlink_is_refused() {
    let (_top, root, elsewhere) = root_and_elsewhere();
    let mut server = Server::spawn_in(tempfile::tempdir().unwrap(), &root, &[], &[]);
    // The first run tells the session; a program could then place the next run's folder.
    let r = call(
        &mut server,
        1,
        "run_profiler",
        json!({"profiler":"custom","target":{"command":["true"]}}),
    );
    let session = r["result"]["structuredContent"]["session"]
        .as_str()
        .unwrap()
        .to_string();
    let session_dir = root.join("profile_output").join(&session);
    for (n, name) in ["r002-custom", "r003-custom"].iter().enumerate() {
        std::os::unix::fs::symlink(&elsewhere, session_dir.join(name)).unwrap();
        let r = call(
            &mut server,
            2 + n as u64,
            "run_profiler",
            json!({"profiler":"custom","target":{"command":["echo","hello"]}}),
        );
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert!(r.to_string().contains("already exists"), "{r}");
    }
    // `.backup` and `instrument` placed as links out: instrument_file refuses, writes nothing.
    std::fs::create_dir_all(root.join("profile_output")).unwrap();
    let _ = std::fs::remove_dir_all(root.join("profile_output/.backup"));
    std::os::unix::fs::symlink(&elsewhere, root.join("profile_output/.backup")).unwrap();
    std::fs::write(root.join("m.py"), "def work():\n    return 1\n\nwork()\n").unwrap();
    let r = call(
        &mut server,
        9,
        "instrument_file",
        json!({"path":"m.py","strategy":"decorator","function":"work","measure":"timing"}),
    );
    assert!(
        r["error"].is_object() || r["result"]["isError"] == true,
        "{r}"
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing may land outside"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("m.py")).unwrap(),
        "def work():\n    return 1\n\nwork()\n"
    );
}

#[test]
fn revert_through_a_swapped_parent_does_not_write_outside() {
    let (_top, root, elsewhere) = root_and_elsewhere();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let source = "def work():\n    return 1\n\nwork()\n";
    std::fs::write(root.join("sub/s.py"), source).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::spawn_in(dir, &root, &[], &[]);
    let r = call(
        &mut server,
        1,
        "instrument_file",
        json!({"path":"sub/s.py","strategy":"decorator","function":"work","measure":"timing"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    // mv sub sub_real; cp -r sub_real ../elsewhere/evil; ln -s ../elsewhere/evil sub
    std::fs::rename(root.join("sub"), root.join("sub_real")).unwrap();
    std::fs::create_dir_all(elsewhere.join("evil")).unwrap();
    let edited = std::fs::read(root.join("sub_real/s.py")).unwrap();
    std::fs::write(elsewhere.join("evil/s.py"), &edited).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("evil"), root.join("sub")).unwrap();
    for (id, force) in [(2, false), (3, true)] {
        let r = call(
            &mut server,
            id,
            "revert_changes",
            json!({"all": true, "force": force}),
        );
        let text = r.to_string();
        assert!(
            !text.contains("sha256 verified") && !text.contains("\"restored\""),
            "force={force}: {text}"
        );
        assert_eq!(
            std::fs::read(elsewhere.join("evil/s.py")).unwrap(),
            edited,
            "force={force}: the outside file was rewritten"
        );
    }
}

#[test]
fn secrets_the_server_inherited_appear_in_no_file_or_result() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let secrets = [
        ("ANTHROPIC_API_KEY", "sk-ant-inherited-0123456789"),
        ("HF_HUB_TOKEN", "hf_inherited_abcdefgh"),
        ("DATABASE_URL", "postgres://admin:DbSecret99@db.local/app"),
        (
            "SLACK_WEBHOOK_URL",
            "https://hooks.example/T0/B0/webhooksecret",
        ),
        ("SESSION_COOKIE", "cookie-secret-4242"),
        ("SSH_PASSPHRASE", "passphrase-secret-77"),
    ];
    let mut server = Server::spawn_in(dir, &root, &[], &secrets);
    let script = root.join("leak.py");
    std::fs::write(
        &script,
        "import os, sys\nfor k in sorted(os.environ):\n    print(k, os.environ[k])\n\
         print('argv', sys.argv)\nprint('Authorization: Bearer argv-bearer-555', file=sys.stderr)\n",
    )
    .unwrap();
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8_lossy(&python.stdout).trim().to_string();
    let mut results = Vec::new();
    for (id, profiler, target) in [
        (
            1,
            "measure",
            json!({"command":[python, script, "--api-key", "argv-key-9999", "--password=argv-pw-8888"]}),
        ),
        (
            2,
            "custom",
            json!({"command":[format!("API_KEY=shell-key-7777 {python} {}", script.display())], "shell": true}),
        ),
    ] {
        let r = call(
            &mut server,
            id,
            "run_profiler",
            json!({"profiler":profiler,"target":target}),
        );
        assert_eq!(r["result"]["isError"], false, "{r}");
        results.push(r.to_string());
    }
    results.push(call(&mut server, 3, "list_runs", json!({})).to_string());
    results.push(call(&mut server, 4, "summarize", json!({})).to_string());
    let mut leaked = Vec::new();
    let words: Vec<&str> = secrets
        .iter()
        .map(|(_, v)| *v)
        .map(|v| {
            v.rsplit([':', '/'])
                .next()
                .map(|tail| if v.contains('@') { "DbSecret99" } else { tail })
                .unwrap_or(v)
        })
        .chain([
            "argv-key-9999",
            "argv-pw-8888",
            "shell-key-7777",
            "argv-bearer-555",
        ])
        .collect();
    for (path, bytes) in snapshot(&root.join("profile_output")) {
        let text = String::from_utf8_lossy(&bytes);
        for w in &words {
            if text.contains(w) {
                leaked.push(format!("{w} in {path}"));
            }
        }
    }
    for (i, r) in results.iter().enumerate() {
        for w in &words {
            if r.contains(w) {
                leaked.push(format!("{w} in result {i}"));
            }
        }
    }
    assert!(leaked.is_empty(), "secrets leaked: {leaked:#?}");
    // The child did get the real values (the scrubbing is ours, not the program's).
    let stdout = snapshot(&root.join("profile_output"))
        .into_iter()
        .find(|(p, _)| p.ends_with("stdout.txt"))
        .map(|(_, b)| String::from_utf8_lossy(&b).into_owned())
        .unwrap();
    assert!(stdout.contains("ANTHROPIC_API_KEY ***"), "{stdout}");
}

/// The processes carrying a server's run mark.
fn marked_by(server_pid: u32) -> usize {
    let wanted = format!("SYSTEM_PROFILE_RUN={server_pid}-");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| {
            std::fs::read(e.path().join("environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|kv| kv.starts_with(wanted.as_bytes()))
            }) && alive(e.file_name().to_str().unwrap().parse().unwrap())
        })
        .count()
}

fn fork_200(server: &mut Server, root: &Path) {
    let script = root.join("fork200.py");
    std::fs::write(
        &script,
        "import os, time\nfor _ in range(200):\n    if os.fork() == 0:\n        time.sleep(600)\n        os._exit(0)\ntime.sleep(600)\n",
    )
    .unwrap();
    let r = call(
        server,
        1,
        "run_profiler",
        json!({"profiler":"custom","background":true,"target":{"command":["python3", script]}}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let pid = server.child.id();
    assert!(
        wait_until(Duration::from_secs(120), || marked_by(pid) >= 201),
        "the target forked: {} marked",
        marked_by(pid)
    );
}

/// A server running the fork-200 target in the background, and its pid.
fn forking_server() -> (Server, u32) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let mut server = Server::spawn_in(dir, &root, &[], &[]);
    fork_200(&mut server, &root);
    let pid = server.child.id();
    (server, pid)
}

fn watchdog_of(server_pid: u32) -> Option<i32> {
    std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        (args.get(1) == Some(&&b"__watchdog"[..])
            && args.get(2) == Some(&server_pid.to_string().as_bytes()))
        .then_some(pid)
    })
}

#[test]
fn a_server_killed_with_sigkill_leaves_no_child() {
    let (mut server, pid) = forking_server();
    server.child.kill().unwrap();
    let _ = server.child.wait();
    assert!(
        wait_until(Duration::from_secs(120), || marked_by(pid) == 0),
        "{} children outlived their server",
        marked_by(pid)
    );
}

#[test]
fn a_starting_server_ends_what_a_dead_one_left() {
    let (mut server, pid) = forking_server();
    // Watchdog and server both gone at once: nobody cleaned up.
    let watchdog = watchdog_of(pid).expect("the server started a watchdog");
    // SAFETY: SIGKILL to a pid we just found.
    unsafe { libc::kill(watchdog, libc::SIGKILL) };
    assert!(wait_until(Duration::from_secs(30), || !alive(watchdog)));
    server.child.kill().unwrap();
    let _ = server.child.wait();
    // Nobody is left to end them but a server that starts (here or in a test beside).
    let other = tempfile::tempdir().unwrap();
    let next = Server::spawn(&[]);
    drop(other);
    assert!(
        wait_until(Duration::from_secs(120), || marked_by(pid) == 0),
        "{} orphans left after a new server started",
        marked_by(pid)
    );
    drop(next);
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn one_request_cannot_cost_unbounded_memory() {
    let mut server = Server::spawn(&[]);
    // A batch over the limit runs nothing and says the limit.
    let marker = server.root.path().join("ran");
    let mut batch: Vec<Value> = (0..10_000)
        .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"list_runs"}))
        .collect();
    batch.push(serde_json::from_str(&run_touch(&marker)).unwrap());
    let r = server.ask(&Value::Array(batch).to_string());
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 64"),
        "{r}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!marker.exists());
    // 64 is answered whole.
    let batch: Vec<Value> = (0..64)
        .map(|i| json!({"jsonrpc":"2.0","id":i,"method":"ping"}))
        .collect();
    let r = server.ask(&Value::Array(batch).to_string());
    assert_eq!(r.as_array().map(Vec::len), Some(64), "{r}");
}

#[test]
fn a_client_that_stops_reading_does_not_grow_the_server() {
    let mut server = Server::spawn(&[]);
    let pid = server.child.id();
    assert_eq!(server.ask(&initialize(0, "2025-06-18"))["id"], 0);
    let start_kib = rss_kib(pid);
    // 2,000 tools/list (about 0.3 MB each) sent by a thread, none read meanwhile.
    let mut stdin = server.take_stdin();
    let sender = std::thread::spawn(move || {
        for i in 1..=2000 {
            let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tools/list\"}}\n");
            if stdin.write_all(line.as_bytes()).is_err() {
                return i;
            }
        }
        2001
    });
    let mut peak_kib = 0;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(100));
        peak_kib = peak_kib.max(rss_kib(pid));
    }
    // Then read everything: every request is answered.
    let mut answered = 0;
    while answered < 2000 {
        let line = server
            .recv_line(Duration::from_secs(120))
            .expect("every request answered");
        if line.contains("\"tools\"") {
            answered += 1;
        }
    }
    assert_eq!(sender.join().unwrap(), 2001);
    let grown_mib = peak_kib.saturating_sub(start_kib) / 1024;
    // Without backpressure it grew linearly, to ~700 MB; the bound is the 64 MiB of queued
    // answers plus 64 being made.
    assert!(
        grown_mib < 200,
        "the server grew by {grown_mib} MiB while nobody read"
    );
}

#[test]
fn unreadable_lines_are_answered_with_their_id() {
    let mut server = Server::spawn(&[]);
    // Invalid UTF-8 inside a string of an otherwise readable request.
    let mut line = br#"{"jsonrpc":"2.0","id":41,"method":"ping","params":{"x":""#.to_vec();
    line.extend_from_slice(&[0xff, 0xfe]);
    line.extend_from_slice(br#""}}"#);
    server.send_bytes(&line);
    let r = server.recv();
    assert_eq!(r["id"], 41, "{r}");
    // A lone surrogate.
    let r = server.ask(r#"{"jsonrpc":"2.0","id":"s1","method":"ping","params":{"x":"\ud800"}}"#);
    assert_eq!(r["id"], "s1", "{r}");
    // A duplicate id: answered under the id it ran with (the last).
    let r = server.ask(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#);
    assert_eq!(r["id"], 2, "{r}");
}

#[test]
fn a_range_over_our_own_lines_is_refused() {
    let mut server = Server::spawn(&[]);
    let root = server.root.path().to_path_buf();
    std::fs::write(
        root.join("m.py"),
        "def work():\n    return 1\n\nprint(work())\n",
    )
    .unwrap();
    let r = call(
        &mut server,
        1,
        "instrument_file",
        json!({"path":"m.py","strategy":"decorator","function":"work","measure":"timing"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    let text = std::fs::read_to_string(root.join("m.py")).unwrap();
    let import_line = text
        .lines()
        .position(|l| l.contains("import _sp_profile"))
        .expect("the helper import")
        + 1;
    let r = call(
        &mut server,
        2,
        "instrument_file",
        json!({"path":"m.py","strategy":"context","measure":"timing",
               "lines":{"start":import_line,"end":import_line}}),
    );
    let said = r.to_string();
    assert!(
        r["error"].is_object() || r["result"]["isError"] == true,
        "{said}"
    );
    assert!(said.contains("helper import"), "{said}");
    // The file still runs.
    let out = std::process::Command::new("python3")
        .arg("m.py")
        .current_dir(&root)
        .env("PATH", path_with_venv())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_gzip_bomb_trace_is_analysed_in_bounded_memory() {
    use flate2::{write::GzEncoder, Compression};
    let mut server = Server::spawn(&[]);
    let root = server.root.path().to_path_buf();
    // 64 MiB of white space between two events (16 times the buffer's bound), then one
    // string of 48 MiB (over the 32 MiB value limit) in a second file; a few hundred KB each
    // compressed.
    let write_bomb = |name: &str, head: &str, fill: u8, tail: &str| {
        let mut gz = GzEncoder::new(
            std::fs::File::create(root.join(name)).unwrap(),
            Compression::fast(),
        );
        gz.write_all(head.as_bytes()).unwrap();
        let block = vec![fill; 1 << 20];
        for _ in 0..if fill == b' ' { 64 } else { 48 } {
            gz.write_all(&block).unwrap();
        }
        gz.write_all(tail.as_bytes()).unwrap();
        gz.finish().unwrap();
    };
    write_bomb(
        "space.json.gz",
        r#"{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":1,"pid":0,"tid":0},"#,
        b' ',
        r#"{"ph":"X","name":"b","ts":2,"dur":1,"pid":0,"tid":0}]}"#,
    );
    write_bomb(
        "string.json.gz",
        r#"{"traceEvents":[{"name":""#,
        b'x',
        r#""}]}"#,
    );
    let pid = server.child.id();
    let before = crate::reliability::peak_rss_bytes(pid);
    for (id, name) in [(1, "space.json.gz"), (2, "string.json.gz")] {
        // A debug build on a busy machine takes its time: wait on the answer, generously.
        server.send(
            &json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                    "params":{"name":"analyze_trace","arguments":{"paths":[name]}}})
            .to_string(),
        );
        let line = server
            .recv_line(Duration::from_secs(600))
            .expect("analyze_trace answers");
        let r: Value = serde_json::from_str(&line).unwrap();
        assert!(r["result"].is_object(), "{r}");
        if id == 2 {
            assert!(r.to_string().contains("over 33554432 bytes"), "{r}");
        }
    }
    let grown_mib = crate::reliability::peak_rss_bytes(pid).saturating_sub(before) >> 20;
    // The scanner's bound is twice its 32 MiB value limit; before, 4.1 GB for a 4 GiB bomb.
    assert!(
        grown_mib < 150,
        "the server grew by {grown_mib} MiB on a bomb"
    );
    assert_eq!(
        server.ask(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#)["id"],
        3
    );
}

/// A thread flips `sub` between the real folder and a symlink out while the real binary
/// instruments and reverts `sub/s.py` again and again: no write lands outside.
#[test]
fn a_folder_flipping_under_instrument_and_revert_never_leads_out() {
    let (_top, root, elsewhere) = root_and_elsewhere();
    let source = "def work():\n    return 1\n\nwork()\n";
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/s.py"), source).unwrap();
    std::fs::create_dir_all(elsewhere.join("evil")).unwrap();
    std::fs::write(elsewhere.join("evil/s.py"), source).unwrap();
    let mut server = Server::spawn_in(tempfile::tempdir().unwrap(), &root, &[], &[]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (root, elsewhere, stop) = (root.clone(), elsewhere.clone(), stop.clone());
        std::thread::spawn(move || {
            let (sub, real) = (root.join("sub"), root.join("sub_real"));
            let mut flips = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::rename(&sub, &real);
                let _ = std::os::unix::fs::symlink(elsewhere.join("evil"), &sub);
                std::thread::sleep(Duration::from_micros(200));
                let _ = std::fs::remove_file(&sub);
                let _ = std::fs::rename(&real, &sub);
                flips += 1;
            }
            flips
        })
    };
    for i in 0..30u64 {
        let _ = call(
            &mut server,
            2 * i + 1,
            "instrument_file",
            json!({"path":"sub/s.py","strategy":"decorator","function":"work","measure":"timing"}),
        );
        let _ = call(
            &mut server,
            2 * i + 2,
            "revert_changes",
            json!({"all": true, "force": true}),
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    assert!(flips > 0);
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("evil/s.py")).unwrap(),
        source,
        "a write went through the symlink ({flips} flips)"
    );
    assert_eq!(
        std::fs::read_dir(elsewhere.join("evil")).unwrap().count(),
        1
    );
}
