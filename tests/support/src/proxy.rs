//! A TCP proxy between one lease store and its MySQL/MariaDB or PostgreSQL server, that plays
//! the outages which would disturb other users of the shared test server if they were real: a
//! stopped server, a silent network, a slow link, a lost COMMIT or its lost answer, a client
//! gone while its transaction holds row locks; and that reaches the server at an address its
//! TLS certificate does not name. Test files of both stores use it, so it is written once
//! here.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gotry_tenant_state::{MysqlOptions, PostgresOptions};

/// What the proxy does with the bytes of its connections; a test switches it at any time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Bytes flow both ways.
    Forward,
    /// Like a stopped server: open connections are cut, new ones closed at once.
    Down,
    /// Like a hung server or a partition: connections stay open and nothing flows.
    Silent,
    /// The next COMMIT is delivered to the server, and the client's connection is cut when
    /// the server's answer comes back, instead of passing it on.
    CutAfterCommit,
    /// The next COMMIT is never delivered: the connection is cut instead.
    CutBeforeCommit,
    /// While set, a connection is cut both ways once its transaction holds row locks: a
    /// statement with `FOR UPDATE` is delivered, and when the server's answer to it comes
    /// back the link is cut instead of passing it on, so no COMMIT can follow. The server
    /// sees its client gone in the middle of a transaction, as when a host dies. PostgreSQL
    /// only: its client sends each statement's text with every execution, while a MySQL
    /// client prepares a statement once and then sends only its id.
    CutAfterLock,
    /// A slow link: each chunk is passed on this long after it arrived, in order, and
    /// chunks in flight do not wait for each other (latency, not a narrow pipe). The TCP
    /// connect to the proxy itself is not delayed.
    Delay(Duration),
}

/// A proxy listening on a port of its own; dropping it cuts every connection it made.
pub struct Proxy {
    /// Where it listens: a test builds URLs of its own on it, with other hosts or options.
    pub port: u16,
    ip: String,
    server: Server,
    shared: Arc<ProxyShared>,
    acceptor: Option<JoinHandle<()>>,
}

/// The server behind a proxy, from its URL.
struct Server {
    protocol: Protocol,
    /// `host:port`.
    address: String,
    user: Option<String>,
    database: String,
}

impl Server {
    /// The server of a `mysql://` or a `postgres://` (`postgresql://`) URL, as the stores
    /// take them.
    fn of(url: &str) -> Server {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PostgresOptions::from_url(url).expect("url");
            Server {
                protocol: Protocol::Postgres,
                address: crate::tls::host_port(&options.host, options.port),
                user: options.user,
                database: options.database,
            }
        } else {
            let options = MysqlOptions::from_url(url).expect("url");
            Server {
                protocol: Protocol::Mysql,
                address: crate::tls::host_port(&options.host, options.port),
                user: options.user,
                database: options.database,
            }
        }
    }
}

/// The wire protocol behind a proxy: all it knows of it is what a COMMIT and its answer
/// look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Mysql,
    Postgres,
}

impl Protocol {
    fn scheme(self) -> &'static str {
        match self {
            Protocol::Mysql => "mysql",
            Protocol::Postgres => "postgres",
        }
    }

    /// Whether `chunk`, on its way to the server, holds the statement COMMIT.
    fn is_commit(self, chunk: &[u8]) -> bool {
        match self {
            // A COM_QUERY packet: command byte 0x03, then the statement text.
            Protocol::Mysql => contains(chunk, b"\x03COMMIT"),
            // A simple-protocol Query message: the statement text, NUL-terminated.
            Protocol::Postgres => contains(chunk, b"COMMIT\0"),
        }
    }

    /// Whether `chunk`, on its way to the server, holds a statement that takes row locks.
    fn is_lock(self, chunk: &[u8]) -> bool {
        // A Parse or a Query message: the statement text.
        self == Protocol::Postgres && contains(chunk, b"FOR UPDATE")
    }

    /// Whether `chunk`, from the server once a locking statement went through, holds its
    /// answer: CommandComplete, tag `SELECT n`. The answers of the statements sent before
    /// it in the same transaction (BEGIN) pass as they are.
    fn is_lock_answer(self, chunk: &[u8]) -> bool {
        self == Protocol::Postgres && contains(chunk, b"SELECT ")
    }

    /// Whether `chunk`, from the server once a COMMIT went through, holds its answer.
    fn is_commit_answer(self, chunk: &[u8]) -> bool {
        match self {
            // The client waits for the COMMIT's answer before it sends anything else, so
            // whatever comes next is that answer.
            Protocol::Mysql => true,
            // CommandComplete, tag COMMIT. Answers before it pass as they are.
            Protocol::Postgres => contains(chunk, b"COMMIT\0"),
        }
    }
}

fn contains(chunk: &[u8], needle: &[u8]) -> bool {
    chunk.windows(needle.len()).any(|w| w == needle)
}

struct ProxyShared {
    protocol: Protocol,
    /// The server's `host:port`.
    upstream: String,
    mode: Mutex<Mode>,
    stop: AtomicBool,
    /// Every socket of every connection, to cut them all at once.
    sockets: Mutex<Vec<TcpStream>>,
    /// Local ports of the proxy's connections to the server: the server lists its clients
    /// by address, so these find exactly this proxy's sessions.
    upstream_ports: Mutex<Vec<u16>>,
}

/// How often a quiet pump looks at the mode again.
const PUMP_TICK: Duration = Duration::from_millis(20);

impl Proxy {
    /// A proxy to the server of `server_url` (a MySQL or a PostgreSQL lease store's URL),
    /// forwarding, on 127.0.0.1.
    pub fn start(server_url: &str) -> Proxy {
        Proxy::start_at("127.0.0.1", server_url)
    }

    /// A proxy that listens on `ip` (any of 127.0.0.0/8 works on Linux).
    pub fn start_at(ip: &str, server_url: &str) -> Proxy {
        let server = Server::of(server_url);
        let listener = TcpListener::bind((ip, 0)).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let shared = Arc::new(ProxyShared {
            protocol: server.protocol,
            upstream: server.address.clone(),
            mode: Mutex::new(Mode::Forward),
            stop: AtomicBool::new(false),
            sockets: Mutex::new(Vec::new()),
            upstream_ports: Mutex::new(Vec::new()),
        });
        let port = listener.local_addr().expect("addr").port();
        let acceptor = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || accept_loop(&listener, &shared))
        };
        Proxy {
            port,
            ip: ip.to_owned(),
            server,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The URL of the server's user and database at the proxy's address; no password, no
    /// options.
    pub fn url(&self) -> String {
        let server = &self.server;
        let user = server
            .user
            .as_ref()
            .map(|user| format!("{user}@"))
            .unwrap_or_default();
        let address = crate::tls::host_port(&self.ip, self.port);
        format!(
            "{}://{user}{address}/{}",
            server.protocol.scheme(),
            server.database
        )
    }

    /// From now on, `mode`; `Down` also cuts the connections already open.
    pub fn set(&self, mode: Mode) {
        assert!(
            mode != Mode::CutAfterLock || self.server.protocol == Protocol::Postgres,
            "Mode::CutAfterLock needs the statement text on the wire, which only PostgreSQL sends each time"
        );
        *self.shared.mode.lock().unwrap() = mode;
        if mode == Mode::Down {
            self.shared.cut_all();
        }
    }

    /// The local ports of its connections to the server so far, by which the server's
    /// process list names this proxy's sessions (to kill them).
    pub fn upstream_ports(&self) -> Vec<u16> {
        self.shared.upstream_ports.lock().unwrap().clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.cut_all();
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

impl ProxyShared {
    fn mode(&self) -> Mode {
        *self.mode.lock().unwrap()
    }

    fn cut_all(&self) {
        for socket in self.sockets.lock().unwrap().drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    fn track(&self, socket: &TcpStream) {
        if let Ok(clone) = socket.try_clone() {
            self.sockets.lock().unwrap().push(clone);
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<ProxyShared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
        };
        client.set_nonblocking(false).expect("blocking");
        match shared.mode() {
            Mode::Down => drop(client),
            // Accepted by the kernel, never answered: the client waits for a greeting.
            Mode::Silent => shared.track(&client),
            Mode::Forward
            | Mode::CutAfterCommit
            | Mode::CutBeforeCommit
            | Mode::CutAfterLock
            | Mode::Delay(_) => {
                let Ok(upstream) = TcpStream::connect(&shared.upstream) else {
                    continue;
                };
                if let Ok(addr) = upstream.local_addr() {
                    shared.upstream_ports.lock().unwrap().push(addr.port());
                }
                shared.track(&client);
                shared.track(&upstream);
                let cuts = Arc::new(Cuts::default());
                for (from, to, to_server) in [
                    (client.try_clone(), upstream.try_clone(), true),
                    (upstream.try_clone(), client.try_clone(), false),
                ] {
                    let (Ok(from), Ok(to)) = (from, to) else { continue };
                    let (shared, cuts) = (Arc::clone(shared), Arc::clone(&cuts));
                    std::thread::spawn(move || pump(from, to, to_server, &cuts, &shared));
                }
            }
        }
    }
}

/// What the client-to-server side of one connection tells the other side to cut.
#[derive(Default)]
struct Cuts {
    /// The COMMIT went through, and its answer must not.
    commit_answer: AtomicBool,
    /// A locking statement went through: the link is cut when its answer comes.
    lock_answer: AtomicBool,
}

/// Copies one direction of one connection, as the mode says.
fn pump(mut from: TcpStream, mut to: TcpStream, to_server: bool, cuts: &Cuts, shared: &ProxyShared) {
    let _ = from.set_read_timeout(Some(PUMP_TICK));
    let mut buffer = [0u8; 16 * 1024];
    // Once a chunk was delayed, every later one goes the same way, so none overtakes it.
    let mut delayed: Option<DelayLine> = None;
    while !shared.stop.load(Ordering::SeqCst) {
        let n = match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => break,
        };
        // Silent: hold what arrived until the mode changes.
        while shared.mode() == Mode::Silent && !shared.stop.load(Ordering::SeqCst) {
            std::thread::sleep(PUMP_TICK);
        }
        let chunk = &buffer[..n];
        if !to_server && cuts.commit_answer.load(Ordering::SeqCst) && shared.protocol.is_commit_answer(chunk)
        {
            // The server answered the COMMIT, so it ran it; the client never hears.
            break;
        }
        if !to_server && cuts.lock_answer.load(Ordering::SeqCst) && shared.protocol.is_lock_answer(chunk) {
            // The server holds the locks; both ends of the link go.
            break;
        }
        let mode = shared.mode();
        if to_server && mode == Mode::CutAfterLock && shared.protocol.is_lock(chunk) {
            cuts.lock_answer.store(true, Ordering::SeqCst);
        }
        let commit = to_server && shared.protocol.is_commit(chunk);
        if commit && matches!(mode, Mode::CutAfterCommit | Mode::CutBeforeCommit) {
            *shared.mode.lock().unwrap() = Mode::Forward;
            if mode == Mode::CutBeforeCommit {
                break;
            }
            cuts.commit_answer.store(true, Ordering::SeqCst);
        }
        let delay = match mode {
            Mode::Delay(delay) => Some(delay),
            _ => None,
        };
        if delay.is_some() || delayed.is_some() {
            let Ok(to) = to.try_clone() else { break };
            let line = delayed.get_or_insert_with(|| DelayLine::new(to));
            if !line.send(chunk, delay.unwrap_or_default()) {
                break;
            }
        } else if to.write_all(chunk).is_err() {
            break;
        }
    }
    // What is still in flight arrives before the end of the stream does.
    if let Some(line) = delayed {
        line.drain();
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// The far half of a delayed direction: writes each chunk once its time has come.
struct DelayLine {
    chunks: mpsc::Sender<(Instant, Vec<u8>)>,
    writer: JoinHandle<()>,
}

impl DelayLine {
    fn new(mut to: TcpStream) -> DelayLine {
        let (chunks, due) = mpsc::channel::<(Instant, Vec<u8>)>();
        let writer = std::thread::spawn(move || {
            for (at, chunk) in due {
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                if to.write_all(&chunk).is_err() {
                    let _ = to.shutdown(Shutdown::Both);
                    return;
                }
            }
        });
        DelayLine { chunks, writer }
    }

    /// False once the writer gave up (its side was closed).
    fn send(&self, chunk: &[u8], delay: Duration) -> bool {
        self.chunks.send((Instant::now() + delay, chunk.to_vec())).is_ok()
    }

    fn drain(self) {
        drop(self.chunks);
        let _ = self.writer.join();
    }
}
