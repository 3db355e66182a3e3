//! The MySQL lease store's TLS, against a second server that only takes TLS connections
//! (require_secure_transport=ON), named by `GOTRY_MYSQL_TLS_URL`, `GOTRY_MYSQL_TLS_CA` (the CA
//! of its certificate, which names `localhost` and `127.0.0.1`) and `GOTRY_MYSQL_TLS_OTHER_CA`
//! (an unrelated CA): `eval "$(scripts/mariadb-tls.sh)"` starts one and sets them, as
//! `scripts/test.sh` does. Without them these tests fail, unless `GOTRY_SKIP_MYSQL=1` marks
//! them ignored.
//!
//! One test also changes that server's global settings, through its administrator's Unix
//! socket (`GOTRY_MYSQL_TLS_ADMIN_SOCKET`, which only the script's throwaway server has):
//! it holds an exclusive lock on the server while it does, and every other test here a
//! shared one, so no test opens a store on a server that is briefly unsafe (nextest runs
//! each test in a process of its own, all at once).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use gotry_tenant_state::lease_store::mysql::{
    SslMode, TLS_CERTIFICATE, TLS_HANDSHAKE, TLS_NOT_OFFERED, TLS_REQUIRED_BY_SERVER, TLS_SETUP,
    UNSAFE_DURABILITY,
};
use gotry_tenant_state::{open_lease_store, Error, LeaseStore, MysqlLeaseStore, MysqlOptions};
use gotry_test_support::mysql::{self as server, encode};
use gotry_test_support::mysql_fixture::{options_at, Fixture};
use gotry_test_support::proxy::{Mode, Proxy};
use gotry_test_support::tls::{self, tenure};
use mysql::prelude::Queryable;

const TLS_URL_VAR: &str = "GOTRY_MYSQL_TLS_URL";
const TLS_CA_VAR: &str = "GOTRY_MYSQL_TLS_CA";
const TLS_OTHER_CA_VAR: &str = "GOTRY_MYSQL_TLS_OTHER_CA";
const TLS_ADMIN_SOCKET_VAR: &str = "GOTRY_MYSQL_TLS_ADMIN_SOCKET";

/// The TLS server of one test.
struct TlsServer {
    url: String,
    /// Its URL's parts: user, password, host, port, database.
    options: MysqlOptions,
    ca: String,
    other_ca: String,
    /// A lock on a file named after the server, held while the test runs: shared by the
    /// tests that only use the server, exclusive for the one that changes its settings.
    _lock: File,
}

impl TlsServer {
    /// The server, or a failure that says what to do when it is not set up; shared with
    /// the other tests that leave its settings alone.
    fn new() -> TlsServer {
        TlsServer::locked(false)
    }

    /// The server, shared with no other test of this file (`exclusive`) or with those that
    /// leave its settings alone.
    fn locked(exclusive: bool) -> TlsServer {
        let [url, ca, other_ca] = tls::server_vars(
            [TLS_URL_VAR, TLS_CA_VAR, TLS_OTHER_CA_VAR],
            "MariaDB/MySQL",
            "mariadb-tls.sh",
            server::SKIP_VAR,
        );
        let options = MysqlOptions::from_url(&url).unwrap_or_else(|e| panic!("{TLS_URL_VAR}: {e}"));
        let path =
            std::env::temp_dir().join(format!("gotry-mysql-tls-{}-{}.lock", options.host, options.port));
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let locked = if exclusive {
            lock.lock()
        } else {
            lock.lock_shared()
        };
        locked.unwrap_or_else(|e| panic!("locking {}: {e}", path.display()));
        TlsServer {
            url,
            options,
            ca,
            other_ca,
            _lock: lock,
        }
    }

    /// The server's URL with `host` and `port` instead of its own, fresh tables, and `query`.
    fn url_at(&self, host: &str, port: u16, query: &str) -> String {
        let o = &self.options;
        tls::url_at(
            "mysql",
            o.user.as_deref(),
            o.password.as_deref(),
            host,
            port,
            &o.database,
            query,
        )
    }

    fn url(&self, query: &str) -> String {
        self.url_at(&self.options.host, self.options.port, query)
    }

    fn ca_query(mode: &str, ca: &str) -> String {
        format!("ssl-mode={mode}&ssl-ca={}", encode(ca))
    }

    /// Neither the password nor the user name is in `shown`.
    fn assert_no_secret(&self, shown: &str) {
        if let Some(password) = self.options.password.as_deref().filter(|p| !p.is_empty()) {
            assert!(!shown.contains(password), "the password is in: {shown}");
        }
        if let Some(user) = self.options.user.as_deref().filter(|u| u.len() > 2) {
            assert!(
                !shown.contains(&format!("'{user}'")),
                "the user name is in: {shown}"
            );
        }
    }

    /// Opening `url` fails with LEASE_STORE_UNAVAILABLE under `code`, naming `mode` and no
    /// secret. Returns the message.
    fn assert_refused(&self, url: &str, code: &str, mode: &str) -> String {
        tls::assert_refused(
            url,
            &server::shown(url),
            code,
            &format!("ssl-mode={mode}"),
            |shown| self.assert_no_secret(shown),
        )
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_verify_identity_with_the_servers_ca_works_end_to_end() {
    let tls = TlsServer::new();
    let url = tls.url(&TlsServer::ca_query("verify_identity", &tls.ca));
    let store = MysqlLeaseStore::open_url(&url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&url)));
    let shown = format!("{store:?}");
    assert!(shown.contains("VerifyIdentity"), "{shown}");
    tls.assert_no_secret(&shown);
    tenure(&store);
    // Calls from several threads at once: each pooled connection made its own handshake.
    std::thread::scope(|scope| {
        for i in 0..4 {
            let store = &store;
            scope.spawn(move || {
                let key = format!("tls-t{i}");
                store.acquire(&key, "o", 60_000).unwrap();
                store.renew(&key, "o", 1, 60_000).unwrap();
            });
        }
    });
    assert_eq!(store.list("tls-t").unwrap().len(), 4);

    // By the DNS name in the certificate, in MySQL's spelling; and with only ssl-ca, which
    // means verify_identity.
    let by_name = tls.url_at(
        "localhost",
        tls.options.port,
        &TlsServer::ca_query("VERIFY_IDENTITY", &tls.ca),
    );
    tenure(&*open_lease_store(&by_name).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&by_name))));
    let ca_only = tls.url(&format!("ssl-ca={}", encode(&tls.ca)));
    let options = MysqlOptions::from_url(&ca_only).unwrap();
    assert_eq!(options.effective_ssl_mode(), SslMode::VerifyIdentity);
    tenure(&MysqlLeaseStore::open(options).unwrap());
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_required_without_a_ca_encrypts_without_checking() {
    let tls = TlsServer::new();
    // The server takes nothing but TLS, so a working store is an encrypted one.
    let url = tls.url("ssl-mode=required");
    tenure(&*open_lease_store(&url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&url))));
    // Unchecked: an address the certificate does not name passes too.
    let other_address = Proxy::start_at("127.0.0.2", &tls.url);
    let url = tls.url_at("127.0.0.2", other_address.port, "ssl-mode=REQUIRED");
    tenure(&*open_lease_store(&url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&url))));
    // With a CA, required checks the chain and not the name.
    let url = tls.url_at(
        "127.0.0.2",
        other_address.port,
        &TlsServer::ca_query("required", &tls.ca),
    );
    tenure(&*open_lease_store(&url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&url))));
    let url = tls.url(&TlsServer::ca_query("required", &tls.other_ca));
    tls.assert_refused(&url, TLS_CERTIFICATE, "required");
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_disabled_is_refused_by_a_server_that_requires_tls() {
    let tls = TlsServer::new();
    let message = tls.assert_refused(&tls.url("ssl-mode=disabled"), TLS_REQUIRED_BY_SERVER, "disabled");
    assert!(
        message.contains("use ssl-mode=required or verify_identity"),
        "{message}"
    );
    // Loopback without ssl-mode is disabled, so the same.
    let loopback_default = tls.url("");
    assert_eq!(
        MysqlOptions::from_url(&loopback_default)
            .unwrap()
            .effective_ssl_mode(),
        SslMode::Disabled
    );
    tls.assert_refused(&loopback_default, TLS_REQUIRED_BY_SERVER, "disabled");

    // A wrong password stays what it is, over either transport, and is never shown.
    let wrong = |query: &str| {
        let mut options = MysqlOptions::from_url(&tls.url(query)).unwrap();
        options.password = Some("Wrong-pw-4711".into());
        let error = MysqlLeaseStore::open(options)
            .map(|_| ())
            .expect_err("a wrong password");
        let shown = format!("{error} | {error:?}");
        assert!(
            matches!(&error, Error::Storage { code, .. } if code == "ER_ACCESS_DENIED_ERROR"),
            "{shown}"
        );
        assert!(!shown.contains("Wrong-pw-4711"), "{shown}");
        tls.assert_no_secret(&shown);
    };
    wrong("ssl-mode=disabled");
    wrong(&TlsServer::ca_query("verify_identity", &tls.ca));
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_verify_identity_with_a_wrong_ca_fails() {
    let tls = TlsServer::new();
    let message = tls.assert_refused(
        &tls.url(&TlsServer::ca_query("verify_identity", &tls.other_ca)),
        TLS_CERTIFICATE,
        "verify_identity",
    );
    assert!(message.contains("UnknownIssuer"), "{message}");
    // Without ssl-ca only the public web roots are trusted, and they did not sign it.
    tls.assert_refused(
        &tls.url("ssl-mode=verify_identity"),
        TLS_CERTIFICATE,
        "verify_identity",
    );
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_verify_identity_refuses_a_host_the_certificate_does_not_name() {
    let tls = TlsServer::new();
    let query = TlsServer::ca_query("verify_identity", &tls.ca);
    // The right certificate, from the right CA, reached at an address it does not name.
    let other_address = Proxy::start_at("127.0.0.2", &tls.url);
    let message = tls.assert_refused(
        &tls.url_at("127.0.0.2", other_address.port, &query),
        TLS_CERTIFICATE,
        "verify_identity",
    );
    assert!(message.contains("127.0.0.2"), "{message}");
    // And at a name it does not name, when this machine has one for 127.0.0.1 (its host
    // name often is).
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let hostname = hostname.trim();
    let resolves_here = !hostname.is_empty()
        && !hostname.eq_ignore_ascii_case("localhost")
        && (hostname, 0)
            .to_socket_addrs()
            .is_ok_and(|mut addrs| addrs.any(|a| a.ip() == std::net::Ipv4Addr::LOCALHOST));
    if resolves_here {
        let same_address = Proxy::start(&tls.url);
        let message = tls.assert_refused(
            &tls.url_at(hostname, same_address.port, &query),
            TLS_CERTIFICATE,
            "verify_identity",
        );
        assert!(message.contains(hostname), "{message}");
    } else {
        println!("no name but localhost resolves to 127.0.0.1 here: the by-name mismatch was not tried");
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_required_of_a_server_without_tls_is_unavailable() {
    let fx = Fixture::default();
    let have_ssl: String = fx
        .scratch
        .connect()
        .query_first("SELECT @@have_ssl")
        .expect("have_ssl")
        .expect("a row");
    if have_ssl == "YES" {
        println!("the plain test server offers TLS (have_ssl = YES): nothing to refuse here");
        return;
    }
    let options = options_at(&fx.url);
    let host = if options.host.contains(':') {
        format!("[{}]", options.host)
    } else {
        options.host.clone()
    };
    for mode in ["required", "verify_identity"] {
        let url = format!(
            "mysql://gotry_nobody_y:pw-Never-Shown@{host}:{}/{}?ssl-mode={mode}",
            options.port, options.database
        );
        let error = open_lease_store(&url).map(|_| ()).expect_err(mode);
        let shown = format!("{error} | {error:?}");
        assert!(matches!(error, Error::LeaseStoreUnavailable { .. }), "{shown}");
        assert!(error.to_string().starts_with(TLS_NOT_OFFERED), "{shown}");
        assert!(shown.contains(&format!("ssl-mode={mode}")), "{shown}");
        assert!(
            !shown.contains("pw-Never-Shown") && !shown.contains("gotry_nobody_y"),
            "{shown}"
        );
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_a_ca_file_gone_since_the_store_opened_fails_the_next_connection() {
    let tls = TlsServer::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::copy(&tls.ca, &ca).unwrap();
    let proxy = Proxy::start(&tls.url);
    let url = tls.url_at(
        "127.0.0.1",
        proxy.port,
        &TlsServer::ca_query("verify_identity", ca.to_str().unwrap()),
    );
    let store = open_lease_store(&url).unwrap_or_else(|e| panic!("{}: {e}", server::shown(&url)));
    store.acquire("k", "o", 60_000).unwrap();
    std::fs::remove_file(&ca).unwrap();
    // The pooled connection is cut, so the next call connects again and reads the CA.
    proxy.set(Mode::Down);
    proxy.set(Mode::Forward);
    let error = store.renew("k", "o", 1, 60_000).expect_err("no CA file");
    let shown = format!("{error} | {error:?}");
    assert!(matches!(error, Error::LeaseStoreUnavailable { .. }), "{shown}");
    assert!(error.to_string().starts_with(TLS_SETUP), "{shown}");
    assert!(
        shown.contains("ssl-mode=verify_identity") && shown.contains("cannot be read"),
        "{shown}"
    );
    tls.assert_no_secret(&shown);
    // Put back, it is read again.
    std::fs::copy(&tls.ca, &ca).unwrap();
    store.renew("k", "o", 1, 60_000).unwrap();
}

/// The TLS server's global settings, changed by its administrator and put back when this
/// is dropped (a failing test too), so that no later test meets a server left unsafe.
struct GlobalSettings {
    admin: mysql::Conn,
    /// Each changed setting's first value, in the order changed.
    saved: Vec<(&'static str, i64)>,
}

impl GlobalSettings {
    /// The administrator's session on the throwaway server's Unix socket, once it is known
    /// to be the server `tls` names and not the shared one, whose settings other tests and
    /// people rely on.
    fn of(tls: &TlsServer) -> GlobalSettings {
        let socket = std::env::var(TLS_ADMIN_SOCKET_VAR)
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| {
                panic!(
                    "this test changes the TLS server's global settings, which it does only to \
                     the throwaway server of scripts/mariadb-tls.sh (that script sets \
                     {TLS_ADMIN_SOCKET_VAR}), never to a server {TLS_URL_VAR} names otherwise"
                )
            });
        let opts = mysql::OptsBuilder::new()
            .socket(Some(socket.as_str()))
            .user(Some("root"));
        let mut admin = mysql::Conn::new(opts).unwrap_or_else(|e| panic!("root on {socket}: {e}"));
        let port: Option<u16> = admin.query_first("SELECT @@port").unwrap();
        assert_eq!(
            port,
            Some(tls.options.port),
            "{socket} is not the server {TLS_URL_VAR} names"
        );
        assert_ne!(
            port,
            Some(options_at(&server::server_url()).port),
            "{socket} is the shared server's"
        );
        GlobalSettings {
            admin,
            saved: Vec::new(),
        }
    }

    fn get(&mut self, name: &str) -> i64 {
        let value: Option<i64> = self.admin.query_first(format!("SELECT @@GLOBAL.{name}")).unwrap();
        value.unwrap_or_else(|| panic!("@@GLOBAL.{name} is NULL"))
    }

    fn set(&mut self, name: &'static str, value: i64) {
        if !self.saved.iter().any(|(saved, _)| *saved == name) {
            let was = self.get(name);
            self.saved.push((name, was));
        }
        self.admin
            .query_drop(format!("SET GLOBAL {name} = {value}"))
            .unwrap();
    }

    /// Every changed setting back to its first value.
    fn restore(&mut self) {
        while let Some((name, value)) = self.saved.pop() {
            self.admin
                .query_drop(format!("SET GLOBAL {name} = {value}"))
                .unwrap_or_else(|e| panic!("{name} could not be set back to {value}: {e}"));
        }
    }
}

impl Drop for GlobalSettings {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A second panic would abort before the rest are put back: each one is tried.
            for (name, value) in self.saved.drain(..).rev() {
                let _ = self.admin.query_drop(format!("SET GLOBAL {name} = {value}"));
            }
        } else {
            self.restore();
        }
    }
}

/// The durability check runs against the server's live settings, not only as a pure
/// function: a server that acknowledges commits a crash can still lose (InnoDB's log not
/// flushed at each commit; with binary logging, the binary log not synced) would let a
/// failover issue an epoch twice, so the store refuses to open on it, with the code hosts
/// match on; set back, the same server opens and works. The script's server runs without
/// binary logging, so `sync_binlog` is only tried on a server that has it.
#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn a_server_that_can_lose_an_acknowledged_commit_is_refused_until_it_is_made_safe() {
    let tls = TlsServer::locked(true);
    let mut settings = GlobalSettings::of(&tls);
    let mut unsafe_settings = vec![("innodb_flush_log_at_trx_commit", 2)];
    if settings.get("log_bin") != 0 {
        unsafe_settings.push(("sync_binlog", 0));
    }
    for (name, value) in unsafe_settings {
        settings.set(name, value);
        let url = tls.url(&TlsServer::ca_query("verify_identity", &tls.ca));
        match MysqlLeaseStore::open_url(&url) {
            Err(Error::Storage { code, message }) => {
                assert_eq!(code, UNSAFE_DURABILITY, "{message}");
                assert!(message.contains(&format!("{name} = {value}")), "{message}");
                tls.assert_no_secret(&message);
            }
            other => panic!("{name} = {value}: {other:?}"),
        }
        settings.restore();
        let url = tls.url(&TlsServer::ca_query("verify_identity", &tls.ca));
        tenure(&MysqlLeaseStore::open_url(&url).unwrap_or_else(|e| panic!("{name} set back: {e}")));
    }
}

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn tls_a_server_that_refuses_the_handshake_is_unavailable() {
    let tls = TlsServer::new();
    // The real server's greeting (it offers TLS), replayed by a server of the test's own
    // that answers the client's switch to TLS with a fatal handshake_failure alert.
    let mut real = TcpStream::connect((tls.options.host.as_str(), tls.options.port)).expect("the TLS server");
    let greeting = read_packet(&mut real);
    drop(real);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        for _ in 0..2 {
            let Ok((mut client, _)) = listener.accept() else {
                return;
            };
            client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = client.write_all(&greeting);
            let _ = read_packet(&mut client); // SSLRequest
            let _ = client.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]);
            let _ = client.shutdown(Shutdown::Write);
            let mut rest = Vec::new();
            let _ = client.read_to_end(&mut rest);
        }
    });
    for mode in ["required", "verify_identity"] {
        let query = TlsServer::ca_query(mode, &tls.ca);
        let message = tls.assert_refused(&tls.url_at("127.0.0.1", port, &query), TLS_HANDSHAKE, mode);
        assert!(message.contains("HandshakeFailure"), "{message}");
    }
    fake.join().unwrap();
}

/// One MySQL protocol packet, with its 4-byte header.
fn read_packet(stream: &mut TcpStream) -> Vec<u8> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).expect("a packet header");
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut packet = header.to_vec();
    packet.resize(4 + len, 0);
    stream.read_exact(&mut packet[4..]).expect("a packet");
    packet
}
