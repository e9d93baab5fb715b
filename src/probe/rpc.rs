//! `probe rpc`: the "light call" floor. Small request/response round trips
//! with idle gaps between them, to a built-in echo server on a pinned thread
//! (loopback by default) or to the user's own service (`--connect`).
//!
//! Every round trip after a gap pays for waking both ends: the server's CPU
//! for the request and the client's for the reply.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::pmqos::{self, PmQosSetting};
use super::{Cpus, Gaps, HostFacts, Latency, Overhead, now_ns, pin_current_thread};
use crate::root::Root;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Udp,
    Tcp,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub proto: Proto,
    pub samples: usize,
    pub gaps: Gaps,
    pub client_cpu: Option<u32>,
    pub server_cpu: Option<u32>,
    /// Address the built-in server binds (port chosen by the kernel).
    pub bind: IpAddr,
    pub connect: Option<String>,
    pub payload: Vec<u8>,
    pub expect: Option<Vec<u8>>,
    pub timeout: Duration,
    pub pmqos_us: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RpcResult {
    pub probe: String,
    #[serde(flatten)]
    pub latency: Latency,
    pub settings: Settings,
    pub overhead: Overhead,
    /// UDP requests that got no reply within the timeout (not in the samples).
    pub lost: u64,
    /// TCP connections reopened because the server closed one between requests.
    pub reconnects: u64,
    /// Bytes that arrived after a reply was complete (discarded before the next request).
    pub stray_bytes: u64,
    pub duration_ms: u64,
    /// True when a signal (Ctrl-C) stopped the run before its last request:
    /// the numbers are from the `samples` taken, of `settings.samples`.
    pub partial: bool,
    /// The signal that stopped the run (`SIGINT`, `SIGTERM`, `SIGHUP`); null: it completed.
    pub interrupted: Option<String>,
    #[serde(skip)]
    pub raw: Vec<(u64, u64)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Settings {
    pub proto: Proto,
    /// `builtin-echo` or `connect`.
    pub server: String,
    pub target: String,
    pub payload_bytes: usize,
    pub expect: Option<String>,
    pub client_cpu: Option<u32>,
    pub server_cpu: Option<u32>,
    pub samples: usize,
    pub gap_us: Gaps,
    pub gap_rule: String,
    pub timeout_ms: u64,
    pub pm_qos: PmQosSetting,
    pub host: HostFacts,
}

impl std::fmt::Display for Proto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Proto::Udp => "UDP",
            Proto::Tcp => "TCP",
        })
    }
}

/// The client end of a connection.
enum Conn {
    Udp(UdpSocket),
    Tcp(TcpStream),
}

impl Conn {
    fn open(proto: Proto, addr: SocketAddr, timeout: Duration, flag: &str) -> Result<Conn> {
        let conn = match proto {
            Proto::Udp => {
                let local: SocketAddr = if addr.is_ipv4() {
                    "0.0.0.0:0".parse().unwrap()
                } else {
                    "[::]:0".parse().unwrap()
                };
                let s = UdpSocket::bind(local).context("cannot open a UDP socket")?;
                s.connect(addr)
                    .map_err(|e| refused(e, flag))
                    .with_context(|| format!("{flag}: cannot connect"))?;
                s.set_read_timeout(Some(timeout))?;
                Conn::Udp(s)
            }
            Proto::Tcp => {
                let s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| refused(e, flag))?;
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(timeout))?;
                Conn::Tcp(s)
            }
        };
        Ok(conn)
    }

    fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Conn::Udp(s) => s.send(buf).map(|_| ()),
            Conn::Tcp(s) => s.write_all(buf),
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Udp(s) => s.recv(buf),
            Conn::Tcp(s) => s.read(buf),
        }
    }

    /// Discards whatever is already queued; `Ok(true)` when the peer has closed.
    fn drain(&mut self, buf: &mut [u8]) -> io::Result<(u64, bool)> {
        self.set_nonblocking(true)?;
        let mut n = 0u64;
        let mut closed = false;
        loop {
            match self.recv(buf) {
                Ok(0) if matches!(self, Conn::Tcp(_)) => {
                    closed = true;
                    break;
                }
                Ok(k) => n += k as u64,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    self.set_nonblocking(false)?;
                    return Err(e);
                }
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        self.set_nonblocking(false)?;
        Ok((n, closed))
    }

    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Conn::Udp(s) => s.set_nonblocking(on),
            Conn::Tcp(s) => s.set_nonblocking(on),
        }
    }
}

fn refused(e: io::Error, flag: &str) -> anyhow::Error {
    match e.kind() {
        ErrorKind::ConnectionRefused => anyhow::anyhow!("{flag}: connection refused"),
        ErrorKind::TimedOut | ErrorKind::WouldBlock => {
            anyhow::anyhow!("{flag}: no answer (timed out)")
        }
        _ => anyhow::Error::new(e).context(format!("{flag}: cannot connect")),
    }
}

/// The built-in echo server: one UDP socket or one TCP connection, served on
/// a pinned thread that blocks in recv between requests (so its CPU idles).
enum Server {
    Udp(UdpSocket),
    Tcp(TcpListener),
}

impl Server {
    fn bind(proto: Proto, ip: IpAddr) -> Result<(Server, SocketAddr)> {
        let at = SocketAddr::new(ip, 0);
        let flag = format!("--bind {ip}");
        Ok(match proto {
            Proto::Udp => {
                let s = UdpSocket::bind(at).with_context(|| format!("{flag}: cannot bind UDP"))?;
                let a = s.local_addr()?;
                (Server::Udp(s), a)
            }
            Proto::Tcp => {
                let s =
                    TcpListener::bind(at).with_context(|| format!("{flag}: cannot bind TCP"))?;
                let a = s.local_addr()?;
                (Server::Tcp(s), a)
            }
        })
    }

    /// Echoes until the client says it is done (an empty datagram, or EOF).
    fn serve(self, cpu: Option<u32>) -> Result<()> {
        if let Some(c) = cpu {
            pin_current_thread(c)?;
        }
        let mut buf = vec![0u8; 65_536];
        match self {
            Server::Udp(s) => loop {
                let (n, from) = s.recv_from(&mut buf).context("echo server: recv")?;
                if n == 0 {
                    return Ok(());
                }
                s.send_to(&buf[..n], from).context("echo server: send")?;
            },
            Server::Tcp(l) => {
                let (mut c, _) = l.accept().context("echo server: accept")?;
                c.set_nodelay(true)?;
                loop {
                    let n = match c.read(&mut buf) {
                        Ok(0) => return Ok(()),
                        Ok(n) => n,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e).context("echo server: read"),
                    };
                    c.write_all(&buf[..n]).context("echo server: write")?;
                }
            }
        }
    }
}

/// Builds the payload for the built-in server: `size` bytes of a repeating pattern.
pub fn pattern(size: usize) -> Vec<u8> {
    (0..size).map(|i| b'a' + (i % 26) as u8).collect()
}

/// `\r`, `\n`, `\t`, `\\`, `\0` and `\xHH` in a payload or expect text.
pub fn unescape(text: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = *b.get(i + 1).context("a lone backslash at the end")?;
        i += 2;
        out.push(match c {
            b'r' => b'\r',
            b'n' => b'\n',
            b't' => b'\t',
            b'0' => 0,
            b'\\' => b'\\',
            b'x' => {
                let hex = text.get(i..i + 2).context("\\x needs two hex digits")?;
                i += 2;
                u8::from_str_radix(hex, 16).with_context(|| format!("\\x{hex}: not hex"))?
            }
            other => bail!("unknown escape \\{}", other as char),
        });
    }
    Ok(out)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

pub fn run(root: &Root, opts: &Options) -> Result<RpcResult> {
    if opts.samples == 0 {
        bail!("--samples 0: at least one sample is needed");
    }
    if opts.payload.is_empty() {
        bail!("the request payload is empty");
    }
    let host = HostFacts::read(root);
    let cpus = Cpus::read(root)?;
    let (client_cpu, server_cpu, target, flag) = match &opts.connect {
        Some(t) => {
            let c = opts
                .client_cpu
                .map(|c| cpus.check("--client-cpu", c))
                .transpose()?;
            (c, None, t.clone(), format!("--connect {t}"))
        }
        None => {
            let (c, s) = cpus.pair(
                ("--client-cpu", opts.client_cpu),
                ("--server-cpu", opts.server_cpu),
            )?;
            (Some(c), Some(s), String::new(), String::new())
        }
    };
    let (server, addr, flag) = match &opts.connect {
        Some(t) => {
            let hosts = super::resolve::read_hosts();
            let addr =
                super::resolve::resolve(t, hosts.as_deref()).with_context(|| flag.clone())?;
            (None, addr, flag)
        }
        None => {
            let (s, a) = Server::bind(opts.proto, opts.bind)?;
            (Some(s), a, format!("built-in echo server at {a}"))
        }
    };
    let target = if target.is_empty() {
        addr.to_string()
    } else {
        target
    };
    let hold = opts.pmqos_us.map(|us| pmqos::hold(root, us)).transpose()?;

    // The expected reply: the echo of the payload, or the user's --expect.
    let expect = match (&opts.connect, &opts.expect) {
        (_, Some(e)) => Some(e.clone()),
        (None, None) => Some(opts.payload.clone()),
        (Some(_), None) => None,
    };
    let start = now_ns();
    let ticker = crate::progress::Ticker::start("rpc", Some(opts.samples as u64), move || {
        if let Some(c) = client_cpu {
            let _ = pin_current_thread(c);
        }
    });
    let outcome = std::thread::scope(|s| -> Result<_> {
        let server_thread = server.map(|srv| s.spawn(move || srv.serve(server_cpu)));
        let client = s.spawn(|| client(opts, addr, client_cpu, expect.as_deref(), &flag, &ticker));
        let result = client.join().expect("client thread panicked");
        if let Some(t) = server_thread {
            // Tell the server to stop, then make sure it did not fail first.
            if result.is_err() {
                stop_server(opts.proto, addr);
            }
            t.join().expect("server thread panicked")?;
        }
        result
    })?;
    let duration_ms = (now_ns() - start) / 1_000_000;
    let pm_qos = PmQosSetting::of(&hold);
    drop(hold);
    let rtts: Vec<u64> = outcome.raw.iter().map(|r| r.1).collect();
    if rtts.is_empty() {
        bail!("{flag}: no replies within {} ms", opts.timeout.as_millis());
    }
    let interrupted = outcome.cut.then(super::interrupted_by).flatten();
    Ok(RpcResult {
        probe: super::Probe::Rpc.as_str().into(),
        latency: Latency::from_ns(&rtts)?,
        settings: Settings {
            proto: opts.proto,
            server: if opts.connect.is_some() {
                "connect".into()
            } else {
                "builtin-echo".into()
            },
            target,
            payload_bytes: opts.payload.len(),
            expect: opts
                .expect
                .as_ref()
                .map(|e| String::from_utf8_lossy(e).into_owned()),
            client_cpu,
            server_cpu,
            samples: opts.samples,
            gap_us: opts.gaps,
            gap_rule: Gaps::RULE.into(),
            timeout_ms: opts.timeout.as_millis() as u64,
            pm_qos,
            host,
        },
        overhead: outcome.overhead,
        lost: outcome.lost,
        reconnects: outcome.reconnects,
        stray_bytes: outcome.stray,
        duration_ms,
        partial: interrupted.is_some(),
        interrupted,
        raw: outcome.raw,
    })
}

/// Unblocks a built-in server whose client gave up.
fn stop_server(proto: Proto, addr: SocketAddr) {
    match proto {
        Proto::Udp => {
            if let Ok(s) = UdpSocket::bind(SocketAddr::new(addr.ip(), 0)) {
                let _ = s.send_to(&[], addr);
            }
        }
        Proto::Tcp => {
            // A connection that closes at once ends an accept-waiting server.
            let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(200));
        }
    }
}

struct Outcome {
    raw: Vec<(u64, u64)>,
    overhead: Overhead,
    lost: u64,
    reconnects: u64,
    stray: u64,
    /// A signal stopped the loop before the last request.
    cut: bool,
}

/// How one request ended.
enum Got {
    /// The reply was complete at this time.
    At(u64),
    /// No reply (UDP: the datagram or its answer was lost).
    Lost,
    /// A reply came, and ended, without the expected text.
    Without,
    /// A signal (Ctrl-C) came while waiting: the request is not counted.
    Cut,
}

/// A run stops after this many replies without the expected text: the
/// service is not answering what was asked.
const MAX_WITHOUT: usize = 3;

/// `2 replies did not contain "ok" (samples 0, 1)`.
fn describe_without(samples: &[usize], opts: &Options, expect: &[u8]) -> String {
    let what = match &opts.expect {
        Some(_) => format!("--expect {}", shown(expect)),
        None => "the echo of the request".to_string(),
    };
    let list: Vec<String> = samples.iter().map(|i| i.to_string()).collect();
    let (replies, was) = match samples.len() {
        1 => ("1 reply".to_string(), "sample"),
        n => (format!("{n} replies"), "samples"),
    };
    let early = samples.last().is_some_and(|&last| last + 1 < opts.samples);
    let stopped = if samples.len() >= MAX_WITHOUT && early {
        "; stopped there"
    } else {
        ""
    };
    format!(
        "{replies} did not contain {what} ({was} {}{stopped})",
        list.join(", ")
    )
}

/// Bytes as quoted, escaped text, cut after 200 bytes.
fn shown(bytes: &[u8]) -> String {
    const MAX: usize = 200;
    let cut = &bytes[..bytes.len().min(MAX)];
    let text: String = String::from_utf8_lossy(cut).escape_debug().collect();
    if bytes.len() > MAX {
        format!("\"{text}\"… ({} bytes)", bytes.len())
    } else {
        format!("\"{text}\"")
    }
}

fn client(
    opts: &Options,
    addr: SocketAddr,
    cpu: Option<u32>,
    expect: Option<&[u8]>,
    flag: &str,
    ticker: &crate::progress::Ticker,
) -> Result<Outcome> {
    if let Some(c) = cpu {
        pin_current_thread(c)?;
    }
    let _sleeper = super::interrupt::register();
    let (clock_read_ns, clock_read_min_ns) = super::clock_cost();
    let per_sample_ns = super::median_of(10_000, || {
        let a = now_ns();
        now_ns() - a
    });
    let mut conn = Conn::open(opts.proto, addr, opts.timeout, flag)?;
    let mut buf = vec![0u8; 65_536];
    let mut reply = Vec::new();
    let mut out = Outcome {
        raw: Vec::with_capacity(opts.samples),
        overhead: Overhead {
            clock_read_ns,
            clock_read_min_ns,
            per_sample_ns,
            wake_call_ns: None,
        },
        lost: 0,
        reconnects: 0,
        stray: 0,
        cut: false,
    };
    // Replies that lacked the expected text (by sample), and the first of them.
    let mut without = Vec::new();
    let mut first_without = Vec::new();
    for i in 0..opts.samples {
        let gap = opts.gaps.gap_ns(i);
        if !super::go_on(super::interrupt::sleep(Duration::from_nanos(gap)))? {
            out.cut = true;
            break;
        }
        let (stray, closed) = conn.drain(&mut buf).map_err(|e| refused(e, flag))?;
        out.stray += stray;
        if closed {
            conn = Conn::open(opts.proto, addr, opts.timeout, flag)?;
            out.reconnects += 1;
        }
        reply.clear();
        let t0 = now_ns();
        conn.send(&opts.payload).map_err(|e| match e.kind() {
            ErrorKind::ConnectionRefused => refused(e, flag),
            _ => anyhow::Error::new(e).context(format!("{flag}: sample {i}: send")),
        })?;
        let got = loop {
            match conn.recv(&mut buf) {
                Ok(0) if opts.proto == Proto::Tcp => {
                    if reply.is_empty() {
                        bail!("{flag}: the connection was closed before a reply (sample {i})")
                    }
                    break Got::Without;
                }
                Ok(n) => {
                    let t = now_ns();
                    reply.extend_from_slice(&buf[..n]);
                    let done = match expect {
                        Some(e) => contains(&reply, e),
                        None => true,
                    };
                    if done {
                        break Got::At(t);
                    }
                    if opts.proto == Proto::Udp {
                        break Got::Without;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {
                    if super::cancelled() {
                        break Got::Cut;
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if opts.proto == Proto::Udp {
                        break Got::Lost;
                    }
                    if !reply.is_empty() {
                        break Got::Without;
                    }
                    bail!(
                        "{flag}: no complete reply within {} ms (sample {i})",
                        opts.timeout.as_millis()
                    );
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    bail!(
                        "{flag}: connection refused (nothing listens on that {} port)",
                        opts.proto
                    )
                }
                Err(e) => return Err(e).context(format!("{flag}: sample {i}: receive")),
            }
        };
        match got {
            Got::At(t1) => out.raw.push((gap, t1 - t0)),
            Got::Lost => out.lost += 1,
            Got::Cut => {
                out.cut = true;
                break;
            }
            Got::Without => {
                if without.is_empty() {
                    first_without = reply.clone();
                }
                without.push(i);
                if without.len() >= MAX_WITHOUT {
                    break;
                }
            }
        }
        ticker.tick();
    }
    if !without.is_empty() {
        bail!(
            "{flag}: {}; first reply: {}",
            describe_without(&without, opts, expect.unwrap_or_default()),
            shown(&first_without)
        );
    }
    // Tell the built-in server we are done.
    match &mut conn {
        Conn::Udp(s) => {
            let _ = s.send(&[]);
        }
        Conn::Tcp(s) => {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
    Ok(out)
}

/// What `verify` compares of a run.
impl super::latency::IntoLatencyRun for RpcResult {
    fn into_latency_run(self) -> Result<super::latency::LatencyRun> {
        super::refuse_partial(&self.interrupted)?;
        Ok(super::latency::LatencyRun {
            split: None,
            samples: self.raw.iter().map(|&(_, rtt)| rtt as f64).collect(),
            settings: serde_json::to_value(&self.settings)?,
            warnings: Vec::new(),
            // Sent counts the measured requests only (a lost one has no sample).
            lost: Some((self.raw.len() as u64 + self.lost, self.lost)),
            evidence: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_become_bytes() {
        assert_eq!(
            unescape("GET / HTTP/1.0\\r\\n\\r\\n").unwrap(),
            b"GET / HTTP/1.0\r\n\r\n"
        );
        assert_eq!(unescape("a\\x41\\\\\\t").unwrap(), b"aA\\\t");
        assert!(unescape("bad\\").is_err());
        assert!(unescape("\\q").is_err());
        assert!(unescape("\\xZZ").is_err());
    }

    #[test]
    fn finds_the_expected_text() {
        assert!(contains(b"HTTP/1.1 200 OK", b"200 OK"));
        assert!(!contains(b"HTTP/1.1 500", b"200"));
        assert!(contains(b"x", b""));
        assert_eq!(pattern(28), b"abcdefghijklmnopqrstuvwxyzab");
    }
}
