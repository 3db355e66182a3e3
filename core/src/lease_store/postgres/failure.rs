//! What failed, what it allows (reusing the connection, trying again), and the core error
//! it becomes.

use super::*;

/// Why a call on one connection failed, kept apart until the end because the kind decides
/// whether the connection may be reused and whether the call may be tried again.
pub(super) enum Failure {
    /// Failed before COMMIT was sent: nothing of it was committed.
    Db(tokio_postgres::Error),
    /// COMMIT was sent and no answer came: it may or may not have been applied.
    Commit(tokio_postgres::Error),
    /// Not the database's failure: the injected clock, a row this store cannot read, an
    /// unsafe server setting.
    Core(Error),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(error: tokio_postgres::Error) -> Failure {
        Failure::Db(error)
    }
}

/// SQLSTATEs that end the session: the server is stopping or dropped us
/// (`pg_terminate_backend` answers 57P01).
const SESSION_ENDED: [&str; 3] = ["57P01", "57P02", "57P03"];

fn sqlstate(error: &tokio_postgres::Error) -> Option<&str> {
    error.code().map(|code| code.code())
}

impl Failure {
    /// The connection cannot be trusted with another statement.
    pub(super) fn breaks_connection(&self) -> bool {
        match self {
            Failure::Commit(_) => true,
            Failure::Db(e) => match sqlstate(e) {
                Some(code) => SESSION_ENDED.contains(&code) || code.starts_with("08"),
                // Not the server's answer: the link failed.
                None => true,
            },
            Failure::Core(_) => false,
        }
    }

    /// The connection was gone before the call could do anything that matters: a fresh
    /// connection may try the call again.
    pub(super) fn lost_connection(&self) -> bool {
        matches!(self, Failure::Db(_)) && self.breaks_connection()
    }

    /// A conflict that rolled the whole transaction back: another writer inserted the same
    /// new key first, or the server broke a deadlock.
    pub(super) fn lost_race(&self) -> bool {
        matches!(self, Failure::Db(e) if matches!(sqlstate(e), Some("23505" | "40P01" | "40001")))
    }
}

/// SQLSTATEs by name, and whether they mean the store cannot serve now
/// (LEASE_STORE_UNAVAILABLE) rather than that something is wrong with the setup or data.
const SERVER_ERRORS: &[(&str, &str, bool)] = &[
    ("23505", "UNIQUE_VIOLATION", true),
    ("23514", "CHECK_VIOLATION", false),
    ("25006", "READ_ONLY_SQL_TRANSACTION", true),
    ("28000", "INVALID_AUTHORIZATION_SPECIFICATION", false),
    ("28P01", "INVALID_PASSWORD", false),
    ("3D000", "INVALID_CATALOG_NAME", false),
    ("40001", "SERIALIZATION_FAILURE", true),
    ("40P01", "DEADLOCK_DETECTED", true),
    ("42501", "INSUFFICIENT_PRIVILEGE", false),
    ("42P01", "UNDEFINED_TABLE", false),
    ("53300", "TOO_MANY_CONNECTIONS", true),
    ("55P03", "LOCK_NOT_AVAILABLE", true),
    ("57014", "QUERY_CANCELED", true),
    ("57P01", "ADMIN_SHUTDOWN", true),
    ("57P02", "CRASH_SHUTDOWN", true),
    ("57P03", "CANNOT_CONNECT_NOW", true),
    ("P0001", "RAISE_EXCEPTION", false),
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
        match failure {
            Failure::Core(error) => error,
            Failure::Commit(e) => Error::unavailable(format!(
                "the connection to the lease store at {} was lost while committing, so the \
                 operation may or may not have been applied: {}",
                self.shown,
                self.describe(&e)
            )),
            Failure::Db(e) => {
                if let Some(error) = self.tls_error(&e) {
                    return error;
                }
                let message = self.describe(&e);
                match sqlstate(&e) {
                    Some(code) => match SERVER_ERRORS.iter().find(|(known, _, _)| *known == code) {
                        Some((_, _, true)) => Error::unavailable(format!(
                            "the lease store at {} cannot serve: {message}",
                            self.shown
                        )),
                        _ if code.starts_with("08") || code.starts_with("53") => Error::unavailable(format!(
                            "the lease store at {} cannot serve: {message}",
                            self.shown
                        )),
                        Some((_, name, false)) => Error::Storage {
                            code: format!("POSTGRES_{name}"),
                            message,
                        },
                        None => Error::Storage {
                            code: format!("POSTGRES_SQLSTATE_{code}"),
                            message,
                        },
                    },
                    None => Error::unavailable(format!(
                        "cannot reach the lease store at {}: {message}",
                        self.shown
                    )),
                }
            }
        }
    }

    /// The call ran out of time: its timeout counts from when it began. Whatever it was
    /// doing was dropped, a COMMIT in flight included, whose outcome is then unknown.
    pub(super) fn timed_out(&self) -> Error {
        Error::unavailable(format!(
            "the lease store at {} did not answer within {} ms of the call's start",
            self.shown,
            self.timeout.as_millis()
        ))
    }

    /// A failure of TLS, under its stable code; `None` when `error` is something else.
    fn tls_error(&self, error: &tokio_postgres::Error) -> Option<Error> {
        let text = error.to_string();
        if text.contains("server does not support TLS") {
            return Some(self.tls_failure(
                TLS_NOT_OFFERED,
                "the server does not offer TLS (its ssl setting is off): give it a certificate, \
                 or use sslmode=disable on a network you trust",
            ));
        }
        if let Some(db) = error.as_db_error() {
            // pg_hba.conf has only `hostssl` lines for this client.
            if self.tls == SslMode::Disable
                && db.code().code() == "28000"
                && db.message().contains("no encryption")
            {
                return Some(self.tls_failure(
                    TLS_REQUIRED_BY_SERVER,
                    "the server accepts only TLS connections from here: use sslmode=require or verify-full",
                ));
            }
            return None;
        }
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            // An I/O error hides the rustls error it carries from `source()`.
            let carried = cause
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>());
            if let Some(tls) = cause.downcast_ref::<rustls::Error>().or(carried) {
                let certificate = matches!(
                    tls,
                    rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
                );
                return Some(if certificate {
                    self.tls_failure(
                        TLS_CERTIFICATE,
                        &format!(
                            "the server's certificate was refused ({tls}); check sslrootcert{}",
                            if self.tls == SslMode::VerifyFull {
                                " and that the certificate names the host of the URL"
                            } else {
                                ""
                            }
                        ),
                    )
                } else {
                    self.tls_failure(TLS_HANDSHAKE, &format!("the TLS handshake failed: {tls}"))
                });
            }
            source = cause.source();
        }
        text.starts_with("error performing TLS handshake").then(|| {
            self.tls_failure(
                TLS_HANDSHAKE,
                &format!("the TLS handshake failed: {}", self.describe(error)),
            )
        })
    }

    pub(super) fn tls_failure(&self, code: &str, what: &str) -> Error {
        Error::unavailable(format!(
            "{code}: cannot connect to the lease store at {} with sslmode={}: {what}",
            self.shown, self.tls
        ))
    }

    /// The driver's or server's words, with the user name masked: the server quotes it in
    /// authentication errors (`for user "name"`). It never quotes the password.
    pub(super) fn describe(&self, error: &tokio_postgres::Error) -> String {
        let text = match error.as_db_error() {
            Some(db) => format!("{} ({}): {}", db.severity(), db.code().code(), db.message()),
            None => error.to_string(),
        };
        match self.user.as_deref().filter(|user| !user.is_empty()) {
            Some(user) => text.replace(&format!("\"{user}\""), "\"<user>\""),
            None => text,
        }
    }
}
