//! A real nginx in front of a server, configured the way the book's nginx page says
//! (`docs/src/deploy/nginx.md`): its `location /firsttoken/ { … }` block is read from that
//! page itself at build time, so
//! the tests run what a user copies and the two cannot drift apart. Only `proxy_pass` is
//! changed, to the server under test.
//!
//! The knobs around that block ([`NginxConfig`]) are the ones a deployment differs by:
//! plain HTTP or TLS (with HTTP/2 or without) on nginx's side; nginx's upstream
//! connections, one per request (the book's block as written: nginx keeps no upstream
//! connection without an `upstream { keepalive … }`) or a shared pool; and the client-port
//! lines the book's Protocols page gives (`docs/src/guide/protocols.md`), which make nginx
//! report the browser's own port.
//!
//! The binary is `NGINX_BIN` (`cargo xtask test` and `cargo xtask bench field` install
//! Debian's `nginx-light` and name it there). One process, no master: killing it when the
//! test ends leaves no worker behind (an orphaned worker kept a test's output pipe open).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The book's pages whose nginx blocks the configuration is made of.
const DOCS: [&str; 2] = [
    include_str!("../../docs/src/deploy/nginx.md"),
    include_str!("../../docs/src/guide/protocols.md"),
];

/// The path prefix the book's block serves.
pub const BASE: &str = "/firsttoken";

/// TLS on nginx's side: the chain and key it sends, PEM-encoded.
#[derive(Debug, Clone)]
pub struct NginxTls {
    pub chain_pem: String,
    pub key_pem: String,
    /// Offer HTTP/2 (ALPN `h2`) besides HTTP/1.1.
    pub http2: bool,
}

/// How nginx stands in front of `upstream`.
#[derive(Debug, Clone)]
pub struct NginxConfig {
    /// The server the book's block passes `/firsttoken/` to.
    pub upstream: SocketAddr,
    /// `None`: plain HTTP/1.1.
    pub tls: Option<NginxTls>,
    /// `Some(n)`: an `upstream` block keeping up to `n` idle connections to the server,
    /// shared by every browser connection. `None`: the book's block as written, a new
    /// upstream connection for each request.
    pub pool: Option<u32>,
    /// Adds the book's client-port lines to the location: nginx reports the browser's port
    /// in `X-Firsttoken-Client-Port`, in place of any the server sends.
    pub client_port: bool,
    /// The port to listen on (from [`free_port`]), when the server behind must know it
    /// before nginx starts; `None`: a free one.
    pub port: Option<u16>,
}

/// A loopback port free now, for a server started a moment later.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl NginxConfig {
    /// the book's block in front of `upstream`, over plain HTTP.
    pub fn plain(upstream: SocketAddr) -> Self {
        Self {
            upstream,
            tls: None,
            pool: None,
            client_port: false,
            port: None,
        }
    }
}

#[cfg(feature = "browser")]
impl NginxConfig {
    /// nginx ending TLS (HTTP/1.1) with `target`'s own chain, so a browser that trusts
    /// [`crate::target::FieldTarget::spki_flag`] trusts nginx, in front of `target`
    /// served over plain HTTP.
    pub fn ending_tls_for(target: &crate::target::FieldTarget) -> Self {
        let (chain_pem, key_pem) = target.chain_and_key_pem();
        Self {
            tls: Some(NginxTls {
                chain_pem,
                key_pem,
                http2: false,
            }),
            ..Self::plain(target.address())
        }
    }
}

/// nginx on a free loopback port; stops when dropped. Its access log records each
/// request's method, URI, `Cookie` header and the client's port.
#[derive(Debug)]
pub struct Nginx {
    child: Child,
    port: u16,
    tls: bool,
    dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    pub fn start(config: &NginxConfig) -> anyhow::Result<Self> {
        let binary = std::env::var("NGINX_BIN").context(
            "NGINX_BIN names the nginx binary: run this with `cargo xtask test` or `cargo xtask bench field`",
        )?;
        let dir = tempfile::tempdir()?;
        let port = match config.port {
            Some(port) => port,
            None => free_port()?,
        };
        let file = dir.path().join("nginx.conf");
        std::fs::write(&file, configuration(config, port, dir.path())?)?;
        let child = Command::new(&binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&file)
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .args(["-g", "daemon off;"])
            // nginx reads NGINX as sockets handed over by an older nginx.
            .env_remove("NGINX")
            .spawn()
            .with_context(|| format!("cannot start {binary}"))?;
        let nginx = Self {
            child,
            port,
            tls: config.tls.is_some(),
            dir,
        };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if start.elapsed() > Duration::from_secs(10) {
                bail!(
                    "nginx did not listen within 10 s: {}",
                    std::fs::read_to_string(nginx.dir.path().join("error.log")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(nginx)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn address(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `http://127.0.0.1:port/path` (`https://` with TLS).
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    /// `$request_method $request_uri cookie=[$http_cookie] port=$remote_port` per request,
    /// in the order nginx finished them.
    pub fn access_log(&self) -> PathBuf {
        self.dir.path().join("access.log")
    }
}

/// The whole `nginx.conf`: the book's location block in a server on `port`.
fn configuration(config: &NginxConfig, port: u16, dir: &std::path::Path) -> anyhow::Result<String> {
    let d = dir.display();
    let mut location = book_location(config)?;
    let mut upstream = String::new();
    if let Some(keep) = config.pool {
        upstream = format!(
            "    upstream firsttoken_upstream {{\n        server {};\n        keepalive {keep};\n    }}\n",
            config.upstream
        );
    }
    if config.client_port {
        let lines = book_block("add_header X-Firsttoken-Client-Port")?;
        let close = location
            .rfind('}')
            .context("the book's location block has no `}`")?;
        let lines: String = lines.lines().map(|l| format!("    {l}\n")).collect();
        location.insert_str(close, &lines);
    }
    let (listen, tls) = match &config.tls {
        None => (format!("127.0.0.1:{port}"), String::new()),
        Some(tls) => {
            std::fs::write(dir.join("chain.pem"), &tls.chain_pem)?;
            std::fs::write(dir.join("key.pem"), &tls.key_pem)?;
            let http2 = if tls.http2 { " http2" } else { "" };
            (
                format!("127.0.0.1:{port} ssl{http2}"),
                format!(
                    "        ssl_certificate {d}/chain.pem;\n        ssl_certificate_key {d}/key.pem;\n"
                ),
            )
        }
    };
    Ok(format!(
        r#"master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format firsttoken '$request_method $request_uri cookie=[$http_cookie] port=$remote_port';
    access_log {d}/access.log firsttoken;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
{upstream}    server {{
        listen {listen};
{tls}{location}
    }}
}}
"#
    ))
}

/// the book's `location /firsttoken/` block, its `proxy_pass` sent to `config`'s upstream.
fn book_location(config: &NginxConfig) -> anyhow::Result<String> {
    let block = book_block(&format!("location {BASE}/ {{"))?;
    let upstream = match config.pool {
        Some(_) => "firsttoken_upstream".to_owned(),
        None => config.upstream.to_string(),
    };
    let mut replaced = false;
    let lines: Vec<String> = block
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("proxy_pass ") {
                replaced = true;
                format!("    proxy_pass http://{upstream};")
            } else {
                line.to_owned()
            }
        })
        .collect();
    if !replaced {
        bail!("the book's nginx block has no proxy_pass line: {block}");
    }
    Ok(lines.join("\n") + "\n")
}

/// The body of the book's fenced `nginx` block that contains `needle`, unindented.
fn book_block(needle: &str) -> anyhow::Result<String> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, Vec<&str>)> = None;
    for line in DOCS.iter().flat_map(|page| page.lines()) {
        let trimmed = line.trim_start();
        match &mut current {
            None if trimmed == "```nginx" => current = Some((line.len() - trimmed.len(), vec![])),
            None => {}
            Some(_) if trimmed == "```" => blocks.extend(current.take().map(|(_, b)| b.join("\n"))),
            Some((indent, body)) => body.push(line.get(*indent..).unwrap_or(line.trim_start())),
        }
    }
    blocks
        .into_iter()
        .find(|b| b.contains(needle))
        .map(|b| b + "\n")
        .with_context(|| format!("the book has no ```nginx block with {needle:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn book_blocks_make_the_configuration() -> anyhow::Result<()> {
        let upstream: SocketAddr = "127.0.0.1:4000".parse()?;
        let dir = tempfile::tempdir()?;
        let plain = configuration(&NginxConfig::plain(upstream), 9000, dir.path())?;
        assert!(plain.contains("location /firsttoken/ {"), "{plain}");
        assert!(
            plain.contains("proxy_pass http://127.0.0.1:4000;"),
            "{plain}"
        );
        assert!(plain.contains("proxy_buffering off;"), "{plain}");
        assert!(!plain.contains("8080"), "{plain}");
        assert!(!plain.contains("add_header"), "{plain}");

        let proxied = NginxConfig {
            pool: Some(4),
            client_port: true,
            tls: Some(NginxTls {
                chain_pem: "chain".into(),
                key_pem: "key".into(),
                http2: true,
            }),
            ..NginxConfig::plain(upstream)
        };
        let both = configuration(&proxied, 9000, dir.path())?;
        assert!(both.contains("listen 127.0.0.1:9000 ssl http2;"), "{both}");
        assert!(both.contains("keepalive 4;"), "{both}");
        assert!(
            both.contains("proxy_pass http://firsttoken_upstream;"),
            "{both}"
        );
        assert!(
            both.contains("add_header X-Firsttoken-Client-Port $remote_port always;"),
            "{both}"
        );
        // The lines sit inside the location block, before its closing brace.
        let location = both.find("location").context("a location")?;
        let header = both.find("add_header").context("the port lines")?;
        assert!(
            location < header && both[header..].contains("}\n"),
            "{both}"
        );
        Ok(())
    }
}
