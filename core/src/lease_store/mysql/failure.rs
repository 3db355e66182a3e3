//! What failed, what it allows (reusing the connection, trying again), and the core error
//! it becomes.

use super::*;

/// Why a call on one connection failed, kept apart until the end because the kind decides
/// whether the connection may be reused and whether the call may be tried again.
pub(super) enum Failure {
    /// Failed before COMMIT was sent: nothing of it was committed.
    Db(mysql::Error),
    /// COMMIT was sent and no answer came: it may or may not have been applied.
    Commit(mysql::Error),
    /// Not the database's failure: the injected clock, or a row this store cannot read.
    Core(Error),
    /// The call's deadline passed before its next statement could be sent: a transaction
    /// it had begun is still open on the connection.
    Deadline,
    /// COMMIT was answered, but after the call's deadline: applied, and too late to be
    /// reported as done.
    LateCommit,
}

impl From<mysql::Error> for Failure {
    fn from(error: mysql::Error) -> Failure {
        Failure::Db(error)
    }
}

/// Server errors that end the session: the server is stopping or dropped us.
pub(super) const SESSION_ENDED: [u16; 3] = [1053, 1927, 4031];

pub(super) fn server_code(error: &mysql::Error) -> Option<u16> {
    match error {
        mysql::Error::MySqlError(e) => Some(e.code),
        _ => None,
    }
}

/// A socket wait that ran out: the driver reports it as an I/O error, bare or inside its
/// packet codec's error.
pub(super) fn is_timeout(error: &mysql::Error) -> bool {
    let io = match error {
        mysql::Error::IoError(e) => Some(e),
        mysql::Error::CodecError(e) => {
            std::error::Error::source(e).and_then(|source| source.downcast_ref::<std::io::Error>())
        }
        mysql::Error::DriverError(mysql::DriverError::ConnectTimeout) => return true,
        _ => None,
    };
    io.is_some_and(|e| {
        matches!(
            e.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        )
    })
}

impl Failure {
    /// The connection cannot be trusted with another statement.
    pub(super) fn breaks_connection(&self) -> bool {
        match self {
            Failure::Commit(_) | Failure::Deadline => true,
            Failure::Db(e) => {
                e.is_connectivity_error() || server_code(e).is_some_and(|code| SESSION_ENDED.contains(&code))
            }
            Failure::Core(_) | Failure::LateCommit => false,
        }
    }

    /// The connection was gone before the call could do anything that matters, and went
    /// at once (no timeout ran out): a fresh connection may try the call again.
    pub(super) fn lost_connection(&self) -> bool {
        matches!(self, Failure::Db(e) if self.breaks_connection() && !is_timeout(e))
    }

    /// A conflict that rolled the whole transaction back: another writer inserted the same
    /// new key first (1062), or InnoDB broke a deadlock (1213).
    pub(super) fn lost_race(&self) -> bool {
        matches!(self, Failure::Db(e) if matches!(server_code(e), Some(1062 | 1213)))
    }
}

/// Server errors by number: their names, and whether they mean the store cannot serve now
/// (LEASE_STORE_UNAVAILABLE) rather than that something is wrong with the setup or data.
pub(super) const SERVER_ERRORS: &[(u16, &str, bool)] = &[
    (1040, "ER_CON_COUNT_ERROR", true),
    (1044, "ER_DBACCESS_DENIED_ERROR", false),
    (1045, "ER_ACCESS_DENIED_ERROR", false),
    (1049, "ER_BAD_DB_ERROR", false),
    (1053, "ER_SERVER_SHUTDOWN", true),
    (1062, "ER_DUP_ENTRY", true),
    (1142, "ER_TABLEACCESS_DENIED_ERROR", false),
    (1143, "ER_COLUMNACCESS_DENIED_ERROR", false),
    (1146, "ER_NO_SUCH_TABLE", false),
    (1152, "ER_ABORTING_CONNECTION", true),
    (1158, "ER_NET_READ_ERROR", true),
    (1159, "ER_NET_READ_INTERRUPTED", true),
    (1160, "ER_NET_ERROR_ON_WRITE", true),
    (1161, "ER_NET_WRITE_INTERRUPTED", true),
    (1203, "ER_TOO_MANY_USER_CONNECTIONS", true),
    (1205, "ER_LOCK_WAIT_TIMEOUT", true),
    (1213, "ER_LOCK_DEADLOCK", true),
    (1227, "ER_SPECIFIC_ACCESS_DENIED_ERROR", false),
    (1290, "ER_OPTION_PREVENTS_STATEMENT", true),
    (1317, "ER_QUERY_INTERRUPTED", true),
    (1419, "ER_BINLOG_CREATE_ROUTINE_NEED_SUPER", false),
    (1644, "ER_SIGNAL_EXCEPTION", false),
    (1665, "ER_BINLOG_STMT_MODE_AND_ROW_ENGINE", false),
    (1698, "ER_ACCESS_DENIED_NO_PASSWORD_ERROR", false),
    (1792, "ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION", true),
    (1836, "ER_READ_ONLY_MODE", true),
    (1927, "ER_CONNECTION_KILLED", true),
    (1969, "ER_STATEMENT_TIMEOUT", true),
    (3024, "ER_QUERY_TIMEOUT", true),
    (3572, "ER_LOCK_NOWAIT", true),
    (3819, "ER_CHECK_CONSTRAINT_VIOLATED", false),
    (4025, "ER_CONSTRAINT_FAILED", false),
    (4031, "ER_CLIENT_INTERACTION_TIMEOUT", true),
];

/// The server as errors name it: its address, the user name to mask, and what was asked.
pub(super) struct Endpoint {
    pub(super) shown: String,
    pub(super) user: Option<String>,
    pub(super) timeout: Duration,
    pub(super) tls: SslMode,
}

impl Endpoint {
    pub(super) fn error(&self, failure: Failure) -> Error {
        if let Failure::Db(e) = &failure {
            if let Some(error) = self.tls_error(e) {
                return error;
            }
        }
        match failure {
            Failure::Core(error) => error,
            Failure::Deadline => self.timed_out(),
            Failure::LateCommit => Error::unavailable(format!(
                "the lease store at {} committed only after the call's {} ms had run out: the \
                 operation was applied, and is reported as not done since its answer came too late",
                self.shown,
                self.timeout.as_millis()
            )),
            Failure::Commit(e) => Error::unavailable(format!(
                "the connection to the lease store at {} was lost while committing, so the \
                 operation may or may not have been applied: {}",
                self.shown,
                self.describe(&e)
            )),
            Failure::Db(e) => match &e {
                mysql::Error::MySqlError(server) => {
                    let known = SERVER_ERRORS.iter().find(|(code, _, _)| *code == server.code);
                    let message = self.describe(&e);
                    match known {
                        Some((_, _, true)) => Error::unavailable(format!(
                            "the lease store at {} cannot serve: {message}",
                            self.shown
                        )),
                        Some((_, name, false)) => Error::Storage {
                            code: (*name).to_owned(),
                            message,
                        },
                        None => Error::Storage {
                            code: format!("MYSQL_ERROR_{}", server.code),
                            message,
                        },
                    }
                }
                _ if is_timeout(&e) => self.timed_out(),
                _ if e.is_connectivity_error() => Error::unavailable(format!(
                    "cannot reach the lease store at {}: {}",
                    self.shown,
                    self.describe(&e)
                )),
                _ => Error::Storage {
                    code: "MYSQL_CLIENT_ERROR".into(),
                    message: self.describe(&e),
                },
            },
        }
    }

    /// The call ran out of time: its timeout counts from when it began, whatever it was
    /// waiting for when the time ran out.
    fn timed_out(&self) -> Error {
        Error::unavailable(format!(
            "the lease store at {} did not answer within {} ms of the call's start",
            self.shown,
            self.timeout.as_millis()
        ))
    }

    /// A failure of TLS, under its stable code; `None` when `error` is something else.
    pub(super) fn tls_error(&self, error: &mysql::Error) -> Option<Error> {
        let (code, what) = match error {
            mysql::Error::DriverError(mysql::DriverError::TlsNotSupported) => (
                TLS_NOT_OFFERED,
                "the server does not offer TLS (its have_ssl is not YES): give it a certificate, \
                 or use ssl-mode=disabled on a network you trust"
                    .to_owned(),
            ),
            // Raised before the handshake, from this side's settings.
            mysql::Error::TlsError(e) => (TLS_SETUP, format!("TLS could not be set up: {e}")),
            // MySQL's ER_SECURE_TRANSPORT_REQUIRED (MariaDB answers access denied instead,
            // which `MysqlLeaseStore::connect` looks into).
            mysql::Error::MySqlError(e) if e.code == 3159 => (
                TLS_REQUIRED_BY_SERVER,
                format!(
                    "the server accepts only TLS connections: use ssl-mode=required or verify_identity ({})",
                    self.describe(error)
                ),
            ),
            _ => {
                let (certificate, text) = rustls_failure(error)?;
                if certificate {
                    (
                        TLS_CERTIFICATE,
                        format!(
                            "the server's certificate was refused ({text}); check ssl-ca{}",
                            match self.tls {
                                SslMode::VerifyIdentity =>
                                    " and that the certificate names the host of the URL",
                                _ => "",
                            }
                        ),
                    )
                } else {
                    (TLS_HANDSHAKE, format!("the TLS handshake failed: {text}"))
                }
            }
        };
        Some(self.tls_failure(code, &what))
    }

    pub(super) fn tls_failure(&self, code: &str, what: &str) -> Error {
        Error::unavailable(format!(
            "{code}: cannot connect to the lease store at {} with ssl-mode={}: {what}",
            self.shown, self.tls
        ))
    }

    /// The driver's or server's words, with the user name masked: the server quotes it in
    /// access errors ('name'@'host'). It never quotes the password.
    pub(super) fn describe(&self, error: &mysql::Error) -> String {
        let text = match error {
            mysql::Error::MySqlError(e) => format!("{} ({}): {}", e.code, e.state, e.message),
            mysql::Error::IoError(e) => e.to_string(),
            mysql::Error::DriverError(e) => e.to_string(),
            other => other.to_string(),
        };
        match self.user.as_deref().filter(|user| !user.is_empty()) {
            Some(user) => text.replace(&format!("'{user}'@"), "'<user>'@"),
            None => text,
        }
    }
}

/// The rustls error that a TLS stream reports inside an I/O error (a handshake that
/// failed), as whether it refused the server's certificate and its words.
pub(super) fn rustls_failure(error: &mysql::Error) -> Option<(bool, String)> {
    /// The driver exposes rustls' error type only as a field of its own `TlsError::Tls`;
    /// that constructor names the type to look for here, with no rustls dependency.
    pub(super) fn downcast<'a, T: std::error::Error + 'static>(
        _named_by: fn(T) -> mysql::error::tls::TlsError,
        error: &'a (dyn std::error::Error + Send + Sync + 'static),
    ) -> Option<&'a T> {
        error.downcast_ref::<T>()
    }
    let io = match error {
        mysql::Error::IoError(e) => e,
        mysql::Error::CodecError(e) => std::error::Error::source(e)?.downcast_ref::<std::io::Error>()?,
        _ => return None,
    };
    let tls = downcast(mysql::error::tls::TlsError::Tls, io.get_ref()?)?;
    // The variant's name: `InvalidCertificate(UnknownIssuer)`, `NoCertificatesPresented`, ...
    let variant = format!("{tls:?}");
    let certificate =
        variant.starts_with("InvalidCertificate") || variant.starts_with("NoCertificatesPresented");
    Some((certificate, tls.to_string()))
}
