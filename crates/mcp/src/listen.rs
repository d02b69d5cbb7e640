//! `serve --listen`: the same `RpcModule` over WebSocket and HTTP through jsonrpsee's server,
//! for scripted clients. Loopback only unless the caller opts in; every request passes
//! `guard` first (Host, Origin, bearer token), since the server runs profilers as the user
//! who started it and a browser can reach loopback.
//!
//! Calls over this listener get no `notifications/progress` (HTTP has no channel for them)
//! and jsonrpsee's own envelope rules (ids that are strings or non-negative integers).

use crate::guard::{GuardLayer, Policy};
use jsonrpsee::server::{Server, ServerHandle};
use jsonrpsee::Methods;
use std::net::SocketAddr;

/// Why the listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot resolve {addr:?}: {source}")]
    Resolve {
        addr: String,
        source: std::io::Error,
    },
    #[error("{addr:?} resolves to no address")]
    NoAddress { addr: String },
    #[error(
        "refusing to listen on {addr}: not a loopback address, and this server runs profilers \
         with your rights; use 127.0.0.1:PORT, or pass --allow-remote if the network is yours"
    )]
    NotLoopback { addr: SocketAddr },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Whether addresses other than loopback may be bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    LoopbackOnly,
    AllowRemote,
}

/// A running listener: where it is bound and the handle that stops it.
pub struct Listener {
    pub local_addr: SocketAddr,
    pub handle: ServerHandle,
}

/// Resolve `addr` (`127.0.0.1:8080`, `localhost:0`, `[::1]:9000`) and check exposure.
pub async fn resolve(addr: &str, exposure: Exposure) -> Result<SocketAddr, ListenError> {
    let mut addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|source| ListenError::Resolve {
            addr: addr.to_string(),
            source,
        })?
        .collect();
    // Prefer IPv4 loopback for `localhost`, which many clients try first.
    addrs.sort_by_key(|a| !a.is_ipv4());
    let first = *addrs.first().ok_or_else(|| ListenError::NoAddress {
        addr: addr.to_string(),
    })?;
    if exposure == Exposure::LoopbackOnly {
        if let Some(bad) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(ListenError::NotLoopback { addr: *bad });
        }
    }
    Ok(first)
}

/// A request is a tool's arguments: 4 MiB is far more than any needs, and bounds what one
/// client can make the server buffer.
pub const MAX_REQUEST_BYTES: u32 = 4 << 20;
/// A response can carry a whole report or trace analysis.
pub const MAX_RESPONSE_BYTES: u32 = 64 << 20;

/// Start serving `methods` on `addr` over HTTP and WebSocket, every request through the
/// guard that `policy` makes once the port is known.
pub async fn start(
    methods: impl Into<Methods>,
    addr: SocketAddr,
    policy: impl FnOnce(SocketAddr) -> Policy,
) -> Result<Listener, ListenError> {
    let config = jsonrpsee::server::ServerConfig::builder()
        .max_request_body_size(MAX_REQUEST_BYTES)
        .max_response_body_size(MAX_RESPONSE_BYTES)
        .build();
    // Bind first: the guard needs the real port when 0 was asked for.
    let socket =
        std::net::TcpListener::bind(addr).map_err(|source| ListenError::Bind { addr, source })?;
    socket
        .set_nonblocking(true)
        .map_err(|source| ListenError::Bind { addr, source })?;
    let local_addr = socket
        .local_addr()
        .map_err(|source| ListenError::Bind { addr, source })?;
    let guard = GuardLayer::new(policy(local_addr));
    let server = Server::builder()
        .set_config(config)
        .set_http_middleware(tower::ServiceBuilder::new().layer(guard))
        .build_from_tcp(socket)
        .map_err(|source| ListenError::Bind { addr, source })?;
    let handle = server.start(methods);
    Ok(Listener { local_addr, handle })
}
