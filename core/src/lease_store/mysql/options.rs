//! The store's options, its URL, and TLS settings.

use super::*;

/// The stable codes that start the message of a TLS failure (LEASE_STORE_UNAVAILABLE); see
/// the module documentation.
pub const TLS_NOT_OFFERED: &str = "MYSQL_TLS_NOT_OFFERED";
/// The server's certificate was refused (unknown issuer, wrong name, expired, ...).
pub const TLS_CERTIFICATE: &str = "MYSQL_TLS_CERTIFICATE";
/// The TLS handshake failed for another reason, or the server refused it.
pub const TLS_HANDSHAKE: &str = "MYSQL_TLS_HANDSHAKE";
/// TLS could not be set up on this side (the `ssl-ca` file, the host name).
pub const TLS_SETUP: &str = "MYSQL_TLS_SETUP";
/// The server refuses plain connections and `ssl-mode=disabled` was asked.
pub const TLS_REQUIRED_BY_SERVER: &str = "MYSQL_TLS_REQUIRED_BY_SERVER";
/// The server acknowledges commits that a crash can still take back
/// (`innodb_flush_log_at_trx_commit` other than 1, or binary logging with `sync_binlog`
/// other than 1): a lost grant is an epoch issued twice.
pub const UNSAFE_DURABILITY: &str = "MYSQL_UNSAFE_DURABILITY";

/// How the link to the server is protected (the URL's `ssl-mode`); see the module
/// documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SslMode {
    /// Plain TCP.
    Disabled,
    /// TLS; the certificate is checked against `ssl-ca` (without its name) when one is
    /// given, and not at all otherwise.
    Required,
    /// TLS; the certificate chains to a trusted CA and names the host.
    VerifyIdentity,
}

impl SslMode {
    /// The URL's spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            SslMode::Disabled => "disabled",
            SslMode::Required => "required",
            SslMode::VerifyIdentity => "verify_identity",
        }
    }

    /// Reads a URL's `ssl-mode`, in either spelling and any case.
    pub fn parse(text: &str) -> Result<SslMode> {
        const KNOWN: &str = "disabled, required or verify_identity";
        match text.to_ascii_lowercase().as_str() {
            "disabled" => Ok(SslMode::Disabled),
            "required" => Ok(SslMode::Required),
            "verify_identity" => Ok(SslMode::VerifyIdentity),
            "preferred" => Err(Error::invalid_argument(format!(
                "ssl-mode=preferred is not offered: it falls back to plain TCP whenever TLS fails, \
                 which anyone on the path can force; use {KNOWN}"
            ))),
            "verify_ca" => Err(Error::invalid_argument(
                "ssl-mode=verify_ca is not offered: this driver trusts the public web roots beside \
                 ssl-ca, so a chain check without the name check is weaker than MySQL's VERIFY_CA; \
                 use verify_identity (chain and name), or required with ssl-ca (chain only)",
            )),
            _ => Err(Error::invalid_argument(format!(
                "ssl-mode is {KNOWN}, got {text:?}"
            ))),
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `host` (as the URL writes it, without brackets) is this machine's loopback:
/// `localhost`, `127.0.0.0/8` or `::1`. A name that merely resolves there is not.
pub fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
        || host.parse::<Ipv6Addr>().is_ok_and(|ip| ip == Ipv6Addr::LOCALHOST)
}

/// Where and how to reach the server. `Debug` leaves the credentials out.
#[derive(Clone)]
pub struct MysqlOptions {
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    pub password: Option<String>,
    pub database: String,
    /// Start of both table names; see [`DEFAULT_TABLE_PREFIX`].
    pub table_prefix: String,
    /// Bound of every call, from its start to its answer; see [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// TLS on the link (`ssl-mode`). `None` chooses when the store opens, by `ssl_ca` and
    /// the host: see [`MysqlOptions::effective_ssl_mode`].
    pub ssl_mode: Option<SslMode>,
    /// CA certificates that the server's certificate must chain to (`ssl-ca`).
    pub ssl_ca: Option<PathBuf>,
    /// Decides on this clock instead of the server's. For tests that play the lease rules
    /// on a manual clock; a deployment leaves it unset.
    pub clock: Option<Arc<dyn WallClock>>,
}

impl fmt::Debug for MysqlOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MysqlOptions")
            .field("endpoint", &endpoint(&self.host, self.port, &self.database))
            .field("table_prefix", &self.table_prefix)
            .field("timeout", &self.timeout)
            .field("ssl_mode", &self.effective_ssl_mode())
            .field("ssl_ca", &self.ssl_ca)
            .field("injected_clock", &self.clock.is_some())
            .finish_non_exhaustive()
    }
}

impl MysqlOptions {
    /// The mode the store connects with: `ssl_mode` when set; otherwise `verify_identity`
    /// with a CA, and without one `disabled` for a loopback host, `required` for any other.
    pub fn effective_ssl_mode(&self) -> SslMode {
        match (self.ssl_mode, &self.ssl_ca) {
            (Some(mode), _) => mode,
            (None, Some(_)) => SslMode::VerifyIdentity,
            (None, None) if is_loopback_host(&self.host) => SslMode::Disabled,
            (None, None) => SslMode::Required,
        }
    }

    /// Reads a `mysql://` URL (see the module documentation). Errors never quote the URL,
    /// since it may carry a password.
    pub fn from_url(url: &str) -> Result<MysqlOptions> {
        let rest = url
            .strip_prefix("mysql://")
            .ok_or_else(|| Error::invalid_argument("a MySQL lease store URL starts with mysql://"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_once('/').ok_or_else(|| {
            Error::invalid_argument("a mysql:// URL names its database: mysql://host:3306/database")
        })?;
        let (user_info, host_port) = match authority.rsplit_once('@') {
            Some((user_info, host_port)) => (Some(user_info), host_port),
            None => (None, authority),
        };
        let (user, password) = match user_info {
            None => (None, None),
            Some(info) => match info.split_once(':') {
                Some((user, password)) => (
                    Some(percent_decode(user, "user name")?),
                    Some(percent_decode(password, "password")?),
                ),
                None => (Some(percent_decode(info, "user name")?), None),
            },
        };
        let (host, port) = split_host_port(host_port)?;
        let database = percent_decode(path, "database name")?;
        if database.is_empty() || database.contains('/') {
            return Err(Error::invalid_argument(
                "a mysql:// URL names one database after the host: mysql://host:3306/database",
            ));
        }
        let mut options = MysqlOptions {
            host,
            port,
            user,
            password,
            database,
            table_prefix: DEFAULT_TABLE_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            ssl_mode: None,
            ssl_ca: None,
            clock: None,
        };
        let mut seen = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value, name)?;
            if seen.contains(&name) {
                return Err(Error::invalid_argument(format!(
                    "the mysql:// URL option {name:?} is given twice"
                )));
            }
            seen.push(name);
            match name {
                "prefix" => options.table_prefix = value,
                "timeout_ms" => {
                    let ms: u64 = value.parse().map_err(|_| {
                        Error::invalid_argument(format!(
                            "timeout_ms is a whole number of milliseconds, got {value:?}"
                        ))
                    })?;
                    options.timeout = Duration::from_millis(ms);
                }
                "ssl-mode" => options.ssl_mode = Some(SslMode::parse(&value)?),
                "ssl-ca" => {
                    if value.is_empty() {
                        return Err(Error::invalid_argument(
                            "ssl-ca names a file of CA certificates: ssl-ca=/path/ca.pem",
                        ));
                    }
                    options.ssl_ca = Some(PathBuf::from(value));
                }
                other => {
                    return Err(Error::invalid_argument(format!(
                        "unknown mysql:// URL option {other:?}; known: prefix, timeout_ms, ssl-mode, ssl-ca"
                    )))
                }
            }
        }
        if options.ssl_mode == Some(SslMode::Disabled) && options.ssl_ca.is_some() {
            return Err(disabled_with_ca());
        }
        Ok(options)
    }
}

pub(super) fn disabled_with_ca() -> Error {
    Error::invalid_argument(
        "ssl-ca is given with ssl-mode=disabled, which checks no certificate: \
         use ssl-mode=required or verify_identity, or leave ssl-ca out",
    )
}

/// The driver's TLS settings for `mode`, after checking that an `ssl-ca` file is there and
/// holds a certificate (the driver reads it again at each connection).
pub(super) fn ssl_opts(mode: SslMode, ca: Option<&Path>) -> Result<Option<SslOpts>> {
    if let Some(ca) = ca {
        if mode == SslMode::Disabled {
            return Err(disabled_with_ca());
        }
        check_ca_file(ca).map_err(Error::invalid_argument)?;
    }
    let roots = |opts: SslOpts| opts.with_root_cert_path(ca.map(|ca| ca.to_path_buf()));
    Ok(match mode {
        SslMode::Disabled => None,
        // Encrypted and unchecked, as MySQL's REQUIRED: anything the server shows passes.
        SslMode::Required if ca.is_none() => Some(SslOpts::default().with_danger_accept_invalid_certs(true)),
        // The chain is checked, the name is not.
        SslMode::Required => Some(roots(SslOpts::default()).with_danger_skip_domain_validation(true)),
        SslMode::VerifyIdentity => Some(roots(SslOpts::default())),
    })
}

/// Whether the `ssl-ca` file can be read and holds a certificate; the reason when not.
pub(super) fn check_ca_file(ca: &Path) -> Result<(), String> {
    let bytes =
        std::fs::read(ca).map_err(|e| format!("the ssl-ca file {} cannot be read: {e}", ca.display()))?;
    let is_pem = bytes
        .windows(b"-----BEGIN CERTIFICATE-----".len())
        .any(|w| w == b"-----BEGIN CERTIFICATE-----");
    // A lone DER certificate is an ASN.1 SEQUENCE with a long-form length.
    let is_der = bytes.first() == Some(&0x30) && matches!(bytes.get(1), Some(0x81..=0x84));
    if is_pem || is_der {
        Ok(())
    } else {
        Err(format!(
            "the ssl-ca file {} holds no certificate (a PEM \"BEGIN CERTIFICATE\" block, or one DER certificate)",
            ca.display()
        ))
    }
}

pub(super) fn split_host_port(host_port: &str) -> Result<(String, u16)> {
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| Error::invalid_argument("an IPv6 host in a mysql:// URL needs its closing ]"))?;
        match after {
            "" => (host, None),
            _ => (
                host,
                Some(after.strip_prefix(':').ok_or_else(|| {
                    Error::invalid_argument("a mysql:// URL has a : between the host and the port")
                })?),
            ),
        }
    } else {
        match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err(Error::invalid_argument("a mysql:// URL names a host"));
    }
    let port = match port {
        None => 3306,
        Some(text) => text
            .parse::<u16>()
            .ok()
            .filter(|port| *port != 0)
            .ok_or_else(|| {
                Error::invalid_argument(format!("a port is a number from 1 to 65535, got {text:?}"))
            })?,
    };
    Ok((host.to_owned(), port))
}

/// [`crate::plumbing::percent_decode`], its refusal naming the part.
pub(super) fn percent_decode(text: &str, what: &str) -> Result<String> {
    crate::plumbing::percent_decode(text).ok_or_else(|| {
        Error::invalid_argument(format!("the {what} in the mysql:// URL is badly percent-encoded"))
    })
}

pub(super) fn endpoint(host: &str, port: u16, database: &str) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}/{database}")
    } else {
        format!("{host}:{port}/{database}")
    }
}
