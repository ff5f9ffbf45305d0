//! Transparent egress in the egress bridge (issue 22): a DNS stub on loopback and the synthetic
//! addresses it hands out, whose connections become `CONNECT name:port` to the proxy.
//!
//! - The stub (UDP and TCP, `--dns ADDR=SOCKET`) decides nothing: for a name it has not mapped
//!   yet it sends the proxy a name query (`ITERION-NAME /<name>` with the run's token, answered
//!   from the proxy's policy function without any resolution), so no query for any name ever
//!   leaves the host. Allowed: an `A` answer from [`SYNTHETIC_NET`] and a listener on that
//!   address for every port the proxy named. Denied: `NXDOMAIN`. `AAAA` (and any other type) of
//!   an allowed name: `NOERROR` with no answer (NODATA), so dual-stack clients fall back to
//!   IPv4; of a denied name: `NXDOMAIN`.
//! - A connection to a synthetic address on a listed port is carried as `CONNECT name:port` with
//!   `Proxy-Authorization: Bearer <token>`; no byte of the client reaches the socket before the
//!   proxy's `200`, and a refusal resets the client's connection (RST). An unmapped address or an
//!   unlisted port has no listener: the kernel resets it at once.
//! - Bounded: [`MAX_NAMES`] mapped names, [`MAX_DNS_MESSAGE`] bytes per message, one question
//!   per query.
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use simple_dns::rdata::{A, RData};
use simple_dns::{CLASS, Packet, PacketFlag, QCLASS, QTYPE, RCODE, ResourceRecord, TYPE};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream, UdpSocket, UnixStream};

/// The synthetic range: 127.100.0.0/16 (inside loopback's 127.0.0.0/8, away from 127.0.0.1 and
/// the 127.0.0.x/127.0.1.x addresses images use for their own names). Host `n` is
/// `127.100.0.0 + n`, `n` from 1.
pub const SYNTHETIC_NET: Ipv4Addr = Ipv4Addr::new(127, 100, 0, 0);
/// The most names one sandbox maps (a query for one more is `SERVFAIL`).
pub const MAX_NAMES: u32 = 4096;
/// The largest DNS message read or answered (UDP datagram or TCP frame).
pub const MAX_DNS_MESSAGE: usize = 4096;
/// TTL of a synthetic answer: the mapping lasts as long as the sandbox.
const ANSWER_TTL: u32 = 300;
/// The largest proxy response head the bridge reads.
const MAX_PROXY_HEAD: usize = 16 * 1024;
/// How long a name query or a CONNECT answer from the proxy may take.
const PROXY_TIMEOUT: Duration = Duration::from_secs(15);
/// An idle DNS-over-TCP connection is closed after this.
const TCP_DNS_IDLE: Duration = Duration::from_secs(10);

/// The stub's state: the proxy socket, the token and the name ↔ address table.
pub struct Transparent {
    socket: PathBuf,
    token: String,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    by_name: HashMap<String, Ipv4Addr>,
    count: u32,
}

/// What the proxy said about a name.
enum NameAnswer {
    Allowed(Vec<u16>),
    Denied,
}

impl Transparent {
    /// A stub asking the proxy at `socket` with `token`.
    pub fn new(socket: PathBuf, token: String) -> Arc<Self> {
        Arc::new(Self {
            socket,
            token,
            table: Mutex::new(Table::default()),
        })
    }

    /// Binds the stub's UDP and TCP sockets on `addr` and serves both forever.
    pub async fn serve(self: Arc<Self>, addr: SocketAddr) -> anyhow::Result<()> {
        use anyhow::Context as _;
        let udp = UdpSocket::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}/udp"))?;
        let tcp = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}/tcp"))?;
        let me = Arc::clone(&self);
        tokio::spawn(async move { me.serve_tcp(tcp).await });
        tokio::spawn(async move { self.serve_udp(udp).await });
        Ok(())
    }

    async fn serve_udp(self: Arc<Self>, udp: UdpSocket) {
        let udp = Arc::new(udp);
        let mut buf = vec![0u8; MAX_DNS_MESSAGE];
        loop {
            let Ok((n, peer)) = udp.recv_from(&mut buf).await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let query = buf[..n].to_vec();
            let (me, udp) = (Arc::clone(&self), Arc::clone(&udp));
            tokio::spawn(async move {
                if let Some(reply) = me.answer(&query).await {
                    let _ = udp.send_to(&reply, peer).await;
                }
            });
        }
    }

    async fn serve_tcp(self: Arc<Self>, listener: TcpListener) {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let me = Arc::clone(&self);
            tokio::spawn(async move {
                while let Ok(Some(query)) =
                    tokio::time::timeout(TCP_DNS_IDLE, read_frame(&mut conn))
                        .await
                        .unwrap_or(Ok(None))
                {
                    let Some(reply) = me.answer(&query).await else {
                        return;
                    };
                    let Ok(len) = u16::try_from(reply.len()) else {
                        return;
                    };
                    if conn.write_all(&len.to_be_bytes()).await.is_err()
                        || conn.write_all(&reply).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    }

    /// The reply to one DNS message, `None` when it is not worth one (too short to carry an id,
    /// or itself a response).
    pub async fn answer(&self, query: &[u8]) -> Option<Vec<u8>> {
        if query.len() < 12 || query.len() > MAX_DNS_MESSAGE || query[2] & 0x80 != 0 {
            return None;
        }
        let id = u16::from_be_bytes([query[0], query[1]]);
        let Ok(packet) = Packet::parse(query) else {
            return error_reply(id, RCODE::FormatError);
        };
        let [question] = packet.questions.as_slice() else {
            return error_reply(id, RCODE::FormatError);
        };
        let mut reply = Packet::new_reply(id);
        reply.set_flags(PacketFlag::RECURSION_AVAILABLE);
        if packet.has_flags(PacketFlag::RECURSION_DESIRED) {
            reply.set_flags(PacketFlag::RECURSION_DESIRED);
        }
        reply.questions.push(question.clone());
        let name = dns_name(&question.qname.to_string());
        let in_class = matches!(question.qclass, QCLASS::CLASS(CLASS::IN) | QCLASS::ANY);
        let mapped = match name {
            Some(name) if in_class => self.lookup(&name).await,
            _ => Ok(None),
        };
        match mapped {
            Err(()) => *reply.rcode_mut() = RCODE::ServerFailure,
            Ok(None) => *reply.rcode_mut() = RCODE::NameError,
            Ok(Some(addr)) => {
                if matches!(question.qtype, QTYPE::TYPE(TYPE::A) | QTYPE::ANY) {
                    reply.answers.push(ResourceRecord::new(
                        question.qname.clone(),
                        CLASS::IN,
                        ANSWER_TTL,
                        RData::A(A::from(addr)),
                    ));
                }
            }
        }
        reply.build_bytes_vec().ok()
    }

    /// The synthetic address of `name`: from the table, else from a name query to the proxy
    /// (`Ok(None)`: denied; `Err`: the proxy could not be asked, or the table is full).
    async fn lookup(&self, name: &str) -> Result<Option<Ipv4Addr>, ()> {
        if let Some(addr) = self.lock().by_name.get(name) {
            return Ok(Some(*addr));
        }
        let ports = match self.ask_proxy(name).await {
            Ok(NameAnswer::Allowed(ports)) => ports,
            Ok(NameAnswer::Denied) => return Ok(None),
            Err(e) => {
                eprintln!("egress bridge: name query for {name}: {e}");
                return Err(());
            }
        };
        let mut table = self.lock();
        if let Some(addr) = table.by_name.get(name) {
            return Ok(Some(*addr));
        }
        if table.count >= MAX_NAMES {
            eprintln!("egress bridge: {MAX_NAMES} names mapped already; refusing {name}");
            return Err(());
        }
        table.count += 1;
        let addr = Ipv4Addr::from(u32::from(SYNTHETIC_NET) + table.count);
        for port in ports {
            match std::net::TcpListener::bind((addr, port)).and_then(|l| {
                l.set_nonblocking(true)?;
                TcpListener::from_std(l)
            }) {
                Ok(listener) => {
                    tokio::spawn(forward_loop(
                        listener,
                        name.to_owned(),
                        port,
                        self.socket.clone(),
                        self.token.clone(),
                    ));
                }
                Err(e) => eprintln!("egress bridge: cannot listen on {addr}:{port}: {e}"),
            }
        }
        table.by_name.insert(name.to_owned(), addr);
        Ok(Some(addr))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn ask_proxy(&self, name: &str) -> std::io::Result<NameAnswer> {
        let head = format!(
            "{} /{name} HTTP/1.1\r\nHost: iterion-bridge\r\nProxy-Authorization: Bearer {}\r\nConnection: close\r\n\r\n",
            NAME_METHOD, self.token
        );
        let mut unix = UnixStream::connect(&self.socket).await?;
        let (status, headers, _) = tokio::time::timeout(PROXY_TIMEOUT, async {
            unix.write_all(head.as_bytes()).await?;
            read_response_head(&mut unix).await
        })
        .await
        .map_err(|_| std::io::Error::other("the proxy did not answer in time"))??;
        match status {
            200 => {
                let ports = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(NAME_PORTS_HEADER))
                    .map(|(_, v)| {
                        v.split(',')
                            .filter_map(|p| p.trim().parse::<u16>().ok())
                            .filter(|p| *p != 0)
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default();
                Ok(if ports.is_empty() {
                    NameAnswer::Denied
                } else {
                    NameAnswer::Allowed(ports)
                })
            }
            400 | 403 => Ok(NameAnswer::Denied),
            other => Err(std::io::Error::other(format!("the proxy answered {other}"))),
        }
    }
}

// The proxy owns the name query's method and ports header; the bridge speaks them.
pub use iterion_netproxy::{NAME_METHOD, NAME_PORTS_HEADER};

/// A question's name as the proxy gets it: lower case, no trailing dot, `a-z 0-9 - _ .` only and
/// 253 bytes at most; anything else is no name (NXDOMAIN, nothing asked).
fn dns_name(raw: &str) -> Option<String> {
    let name = raw.trim_end_matches('.').to_ascii_lowercase();
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
        && !name.split('.').any(|l| l.is_empty() || l.len() > 63);
    ok.then_some(name)
}

fn error_reply(id: u16, rcode: RCODE) -> Option<Vec<u8>> {
    let mut reply = Packet::new_reply(id);
    *reply.rcode_mut() = rcode;
    reply.build_bytes_vec().ok()
}

/// One length-prefixed DNS-over-TCP message; `Ok(None)` at a clean end or on an oversized frame.
async fn read_frame(conn: &mut TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 2];
    if conn.read_exact(&mut len).await.is_err() {
        return Ok(None);
    }
    let len = usize::from(u16::from_be_bytes(len));
    if len > MAX_DNS_MESSAGE {
        return Ok(None);
    }
    let mut buf = vec![0u8; len];
    conn.read_exact(&mut buf).await?;
    Ok(Some(buf))
}

/// Reads an HTTP/1.1 response head (bounded): status, headers, and any bytes read past it.
async fn read_response_head(
    io: &mut UnixStream,
) -> std::io::Result<(u16, Vec<(String, String)>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = io.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::Error::other("the proxy closed before answering"));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&buf) {
            Ok(httparse::Status::Complete(end)) => {
                let status = resp.code.unwrap_or(0);
                let list = resp
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_owned(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                return Ok((status, list, buf[end..].to_vec()));
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_PROXY_HEAD => {}
            _ => return Err(std::io::Error::other("bad response head from the proxy")),
        }
    }
}

async fn forward_loop(
    listener: TcpListener,
    name: String,
    port: u16,
    socket: PathBuf,
    token: String,
) {
    loop {
        match listener.accept().await {
            Ok((tcp, _)) => {
                tokio::spawn(forward(
                    tcp,
                    name.clone(),
                    port,
                    socket.clone(),
                    token.clone(),
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// One transparent connection: `CONNECT name:port`, then the splice; a refusal resets the
/// client (RST), so it fails at once rather than hanging on a half-open socket.
async fn forward(mut tcp: TcpStream, name: String, port: u16, socket: PathBuf, token: String) {
    let _ = tcp.set_nodelay(true);
    match connect_through(&socket, &name, port, &token).await {
        Ok((mut unix, early)) => {
            if !early.is_empty() && tcp.write_all(&early).await.is_err() {
                return;
            }
            let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
        }
        Err(e) => {
            eprintln!("egress bridge: {name}:{port}: {e}");
            let _ = tcp.set_zero_linger();
        }
    }
}

async fn connect_through(
    socket: &Path,
    name: &str,
    port: u16,
    token: &str,
) -> std::io::Result<(UnixStream, Vec<u8>)> {
    let mut unix = UnixStream::connect(socket).await?;
    let head = format!(
        "CONNECT {name}:{port} HTTP/1.1\r\nHost: {name}:{port}\r\nProxy-Authorization: Bearer {token}\r\n\r\n"
    );
    let (status, _, early) = tokio::time::timeout(PROXY_TIMEOUT, async {
        unix.write_all(head.as_bytes()).await?;
        read_response_head(&mut unix).await
    })
    .await
    .map_err(|_| std::io::Error::other("the proxy did not answer in time"))??;
    if !(200..300).contains(&status) {
        return Err(std::io::Error::other(format!(
            "refused by the egress proxy ({status})"
        )));
    }
    Ok((unix, early))
}

#[cfg(test)]
#[path = "transparent_tests.rs"]
mod tests;
