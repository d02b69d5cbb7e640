//! `serve --listen`: the same module over HTTP and WebSocket, loopback only by default.

use crate::util::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Listening {
    child: Child,
    pub addr: SocketAddr,
    pub token: String,
    pub root: tempfile::TempDir,
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn listen() -> Listening {
    listen_with(&[])
}

/// A listener on a fresh root; its address and token read from the lines it prints.
pub fn listen_with(extra: &[&str]) -> Listening {
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(root.path())
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    // Log lines may come first; the address line is the one a script waits for.
    while !line.contains("http://") {
        line.clear();
        if stderr.read_line(&mut line).unwrap() == 0 {
            panic!("the listener ended before saying its address");
        }
    }
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .parse()
        .unwrap();
    let mut token = String::new();
    if !extra.contains(&"--no-auth") {
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        token = line
            .split("bearer token ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no token in {line:?}"))
            .to_string();
    }
    // Keep reading what it logs: a closed stderr would fail its log writes.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Listening {
        child,
        addr,
        token,
        root,
    }
}

/// A raw HTTP request with the given extra header lines; the status and the body.
pub fn http_raw(addr: SocketAddr, headers: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    // One write: a server that refuses on the headers closes at once, and body bytes sent
    // after that would reset the connection before its answer is read.
    let request = format!(
        "POST / HTTP/1.1\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(e) => panic!(
                "reading the answer to {headers:?}: {e} after {} bytes",
                bytes.len()
            ),
        }
    }
    let response = String::from_utf8_lossy(&bytes).into_owned();
    let status: u16 = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

fn http_post(l: &Listening, body: &str) -> (u16, Value) {
    let (status, body) = http_raw(
        l.addr,
        &format!("Host: {}\r\nAuthorization: Bearer {}\r\n", l.addr, l.token),
        body,
    );
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[test]
fn http_serves_the_same_methods() {
    let l = listen();
    let (status, r) = http_post(&l, &initialize(1, "2025-06-18"));
    assert_eq!(status, 200);
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    let (_, r) = http_post(&l, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    assert_eq!(tool_names(&r["result"]), TOOL_NAMES);
    let (_, r) = http_post(&l, r#"{"jsonrpc":"2.0","id":3,"method":"detect_tools"}"#);
    assert!(r["result"]["tools"].as_array().unwrap().len() > 20, "{r}");
    let (_, r) = http_post(
        &l,
        r#"{"jsonrpc":"2.0","id":4,"method":"detect_tools","params":{"refresh":"no"}}"#,
    );
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(r["error"]["data"]["field"], "refresh");
}

/// One masked text frame, as a client must send it.
pub fn ws_frame(text: &str) -> Vec<u8> {
    let payload = text.as_bytes();
    let mut frame = vec![0x81];
    match payload.len() {
        n if n < 126 => frame.push(0x80 | n as u8),
        n if n <= 0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let mask = [0x12, 0x34, 0x56, 0x78];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

pub fn ws_read_text(stream: &mut TcpStream) -> String {
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(head[0] & 0x0f, 0x1, "a text frame");
    let len = match head[1] & 0x7f {
        126 => {
            let mut b = [0u8; 2];
            stream.read_exact(&mut b).unwrap();
            u16::from_be_bytes(b) as usize
        }
        127 => {
            let mut b = [0u8; 8];
            stream.read_exact(&mut b).unwrap();
            u64::from_be_bytes(b) as usize
        }
        n => n as usize,
    };
    let mut payload = vec![0u8; len];
    stream.read_exact(&mut payload).unwrap();
    String::from_utf8(payload).unwrap()
}

#[test]
fn websocket_serves_the_same_methods() {
    let l = listen();
    let mut stream = TcpStream::connect(l.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Authorization: Bearer {}\r\n\r\n",
        l.addr, l.token
    )
    .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // RFC 6455's own example key and accept value.
    assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
    stream
        .write_all(&ws_frame(
            r#"{"jsonrpc":"2.0","id":"w1","method":"tools/list"}"#,
        ))
        .unwrap();
    let r: Value = serde_json::from_str(&ws_read_text(&mut stream)).unwrap();
    assert_eq!(r["id"], "w1");
    assert_eq!(tool_names(&r["result"]), TOOL_NAMES);
    stream
        .write_all(&ws_frame(
            &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"detect_tools"}})
                .to_string(),
        ))
        .unwrap();
    let r: Value = serde_json::from_str(&ws_read_text(&mut stream)).unwrap();
    assert_eq!(r["result"]["isError"], false);
    assert!(
        r["result"]["structuredContent"]["hardware"]["memory"]["total_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[test]
fn a_non_loopback_address_is_refused_unless_allowed() {
    let out = Command::new(BIN)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    assert!(stderr.contains("--allow-remote"), "{stderr}");
    let out = Command::new(BIN)
        .args(["serve", "--allow-remote"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "--allow-remote needs --listen");
}

#[test]
fn an_oversized_request_is_refused_and_the_listener_goes_on() {
    let l = listen();
    // 5 MiB of arguments: over the 4 MiB limit.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"identify_target","params":{{"arguments":"{}"}}}}"#,
        "x".repeat(5 << 20)
    );
    let mut stream = TcpStream::connect(l.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // The server may answer and close before it has read everything: a failed write is fine.
    let _ = write!(
        stream,
        "POST / HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{big}",
        l.addr,
        l.token,
        big.len()
    );
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    assert!(
        response.starts_with("HTTP/1.1 413"),
        "{}",
        &response[..response.len().min(200)]
    );
    let (status, r) = http_post(&l, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    assert_eq!(status, 200);
    assert_eq!(r["id"], 2);
}
