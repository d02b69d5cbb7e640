//! Who may talk to `serve --listen`. Loopback is no boundary against a browser: any web page
//! can POST to `127.0.0.1:PORT` or open a WebSocket to it, and DNS rebinding makes a page's
//! own host name resolve there. So every HTTP request and WebSocket upgrade passes three
//! checks before jsonrpsee sees it (the MCP transport rules ask servers to validate `Origin`):
//! - `Host` names the listening address or a loopback name with the listening port;
//! - `Origin`, when present, is one the user allowed (none by default: scripts send none);
//! - `Authorization: Bearer <token>` carries the token generated at start, unless the user
//!   turned authentication off and said why.
//!
//! The decision (`Policy::check`) is pure over the header values; `GuardLayer` is the tower
//! glue that answers a refusal with its status and a sentence that says what to do.

use jsonrpsee::server::{HttpBody, HttpRequest, HttpResponse};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Whether requests must carry the bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    Token(String),
    /// Authentication off, with the reason the user gave for it.
    Off {
        reason: String,
    },
}

/// What the listener accepts.
#[derive(Debug, Clone)]
pub struct Policy {
    pub local_addr: SocketAddr,
    /// Extra `Host` values (`name:port`) accepted, for `--allow-remote` behind a name.
    pub allowed_hosts: Vec<String>,
    /// `Origin` values accepted exactly (`http://localhost:3000`); none by default.
    pub allowed_origins: Vec<String>,
    pub auth: Auth,
}

/// Why a request was turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

impl Policy {
    /// Decide on one request from its `Host`, `Origin` and `Authorization` header values
    /// (`None`: absent; a header sent twice arrives as `Some` of something unmatched).
    pub fn check(
        &self,
        host: Option<&str>,
        origin: Option<&str>,
        authorization: Option<&str>,
    ) -> Result<(), Refusal> {
        let forbidden = |message: String| Refusal {
            status: 403,
            message,
        };
        let Some(host) = host else {
            return Err(forbidden(
                "no Host header: send the listening address as Host".into(),
            ));
        };
        if !self.host_allowed(host) {
            return Err(forbidden(format!(
                "Host {host:?} is not this listener ({}): requests must name it or localhost \
                 with its port; pass --allow-host NAME:PORT for another name",
                self.local_addr
            )));
        }
        if let Some(origin) = origin {
            if !self.allowed_origins.iter().any(|o| o == origin) {
                return Err(forbidden(format!(
                    "Origin {origin:?} is not allowed: a web page may not drive this server; \
                     pass --allow-origin {origin} if it is yours"
                )));
            }
        }
        if let Auth::Token(token) = &self.auth {
            // HTTP's scheme names are case-insensitive (RFC 9110 §11.1): `bearer` is `Bearer`.
            let given = authorization
                .and_then(|a| a.trim_start().split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, token)| token.trim());
            if !given.is_some_and(|g| same_secret(g.as_bytes(), token.as_bytes())) {
                return Err(Refusal {
                    status: 401,
                    message: "missing or wrong bearer token: send `Authorization: Bearer <token>` \
                              with the token printed at start and kept in \
                              profile_output/.listen-token"
                        .into(),
                });
            }
        }
        Ok(())
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let port = self.local_addr.port();
        let exact = [
            self.local_addr.to_string(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ];
        exact.contains(&host)
            || self
                .allowed_hosts
                .iter()
                .any(|h| h.to_ascii_lowercase() == host)
    }
}

/// Equal secrets, compared without stopping at the first difference.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh token: 32 bytes from the kernel's generator, hex.
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The tower layer that applies a `Policy` to every request and upgrade.
#[derive(Clone)]
pub struct GuardLayer(Arc<Policy>);

impl GuardLayer {
    pub fn new(policy: Policy) -> Self {
        Self(Arc::new(policy))
    }
}

impl<S> tower::Layer<S> for GuardLayer {
    type Service = Guard<S>;
    fn layer(&self, inner: S) -> Guard<S> {
        Guard {
            inner,
            policy: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Guard<S> {
    inner: S,
    policy: Arc<Policy>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, B> tower::Service<HttpRequest<B>> for Guard<S>
where
    S: tower::Service<HttpRequest<B>, Response = HttpResponse>,
    S::Error: Into<BoxError> + 'static,
    S::Future: Send + 'static,
{
    type Response = HttpResponse;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: HttpRequest<B>) -> Self::Future {
        let headers = request.headers();
        let one = |name: http::header::HeaderName| {
            let mut values = headers.get_all(name).iter();
            match (values.next(), values.next()) {
                (None, _) => None,
                // Two of one header: something no check should match.
                (Some(_), Some(_)) => Some("\u{0}(sent twice)"),
                (Some(v), None) => Some(v.to_str().unwrap_or("\u{0}(not text)")),
            }
        };
        // HTTP/2 carries the host as the URI's authority, not a header.
        let authority = request.uri().authority().map(|a| a.as_str().to_string());
        let host = one(http::header::HOST).map(str::to_string).or(authority);
        let verdict = self.policy.check(
            host.as_deref(),
            one(http::header::ORIGIN),
            one(http::header::AUTHORIZATION),
        );
        match verdict {
            Ok(()) => {
                let future = self.inner.call(request);
                Box::pin(async move { future.await.map_err(Into::into) })
            }
            Err(refusal) => {
                tracing::warn!(status = refusal.status, message = %refusal.message, "request refused");
                let response = http::Response::builder()
                    .status(refusal.status)
                    .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
                    .body(HttpBody::from(format!("{}\n", refusal.message)))
                    .expect("a status and a text body always build");
                Box::pin(async move { Ok(response) })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(auth: Auth) -> Policy {
        Policy {
            local_addr: "127.0.0.1:8765".parse().unwrap(),
            allowed_hosts: vec![],
            allowed_origins: vec!["http://localhost:3000".into()],
            auth,
        }
    }

    #[test]
    fn hosts_origins_and_tokens() {
        let p = policy(Auth::Token("s3cret".into()));
        let ok = Some("Bearer s3cret");
        assert_eq!(p.check(Some("127.0.0.1:8765"), None, ok), Ok(()));
        for scheme in ["bearer s3cret", "BEARER s3cret"] {
            assert_eq!(p.check(Some("127.0.0.1:8765"), None, Some(scheme)), Ok(()));
        }
        assert_eq!(p.check(Some("localhost:8765"), None, ok), Ok(()));
        assert_eq!(p.check(Some("[::1]:8765"), None, ok), Ok(()));
        assert_eq!(
            p.check(Some("127.0.0.1:8765"), Some("http://localhost:3000"), ok),
            Ok(())
        );
        // DNS rebinding: the page's own name, or the right name on another port.
        for host in [
            "evil.example:8765",
            "localhost:80",
            "localhost",
            "127.0.0.1",
        ] {
            let r = p.check(Some(host), None, ok).unwrap_err();
            assert_eq!(r.status, 403, "{host}");
            assert!(r.message.contains("--allow-host"), "{}", r.message);
        }
        assert_eq!(p.check(None, None, ok).unwrap_err().status, 403);
        let r = p
            .check(Some("127.0.0.1:8765"), Some("http://evil.example"), ok)
            .unwrap_err();
        assert_eq!(r.status, 403);
        assert!(r.message.contains("--allow-origin"), "{}", r.message);
        // "null" is what sandboxed frames and file: pages send.
        assert_eq!(
            p.check(Some("127.0.0.1:8765"), Some("null"), ok)
                .unwrap_err()
                .status,
            403
        );
        for bad in [
            None,
            Some("Bearer wrong"),
            Some("s3cret"),
            Some("Bearer s3cre"),
            Some("Basic s3cret"),
        ] {
            let r = p.check(Some("127.0.0.1:8765"), None, bad).unwrap_err();
            assert_eq!(r.status, 401, "{bad:?}");
            assert!(r.message.contains(".listen-token"), "{}", r.message);
        }
        let open = policy(Auth::Off {
            reason: "a private namespace".into(),
        });
        assert_eq!(open.check(Some("127.0.0.1:8765"), None, None), Ok(()));
        // Turning the token off keeps the browser checks.
        assert_eq!(
            open.check(Some("127.0.0.1:8765"), Some("http://evil.example"), None)
                .unwrap_err()
                .status,
            403
        );
    }

    #[test]
    fn tokens_are_fresh_and_long() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
