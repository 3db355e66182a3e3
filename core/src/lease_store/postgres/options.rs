//! The store's options, its URL, and TLS settings.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::*;
use crate::lease_store::url_parts;

/// The stable codes that start the message of a TLS failure (LEASE_STORE_UNAVAILABLE).
/// The server does not offer TLS.
pub const TLS_NOT_OFFERED: &str = "POSTGRES_TLS_NOT_OFFERED";
/// The server's certificate was refused (unknown issuer, wrong name, expired, ...).
pub const TLS_CERTIFICATE: &str = "POSTGRES_TLS_CERTIFICATE";
/// The TLS handshake failed for another reason.
pub const TLS_HANDSHAKE: &str = "POSTGRES_TLS_HANDSHAKE";
/// TLS could not be set up on this side (the `sslrootcert` file, the host name).
pub const TLS_SETUP: &str = "POSTGRES_TLS_SETUP";
/// The server refuses plain connections (`hostssl` in its `pg_hba.conf`) and
/// `sslmode=disable` was asked.
pub const TLS_REQUIRED_BY_SERVER: &str = "POSTGRES_TLS_REQUIRED_BY_SERVER";

/// How the link to the server is protected (the URL's `sslmode`, in libpq's spelling).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SslMode {
    /// Plain TCP.
    Disable,
    /// TLS; the certificate is checked against `sslrootcert` (without its name) when one
    /// is given, and not at all otherwise, as libpq does.
    Require,
    /// TLS; the certificate chains to a trusted CA and names the host.
    VerifyFull,
}

impl SslMode {
    pub const fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Require => "require",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Reads a URL's `sslmode`.
    pub fn parse(text: &str) -> Result<SslMode> {
        const KNOWN: &str = "disable, require or verify-full";
        match text {
            "disable" => Ok(SslMode::Disable),
            "require" => Ok(SslMode::Require),
            "verify-full" => Ok(SslMode::VerifyFull),
            "allow" | "prefer" => Err(Error::invalid_argument(format!(
                "sslmode={text} is not offered: it connects without TLS whenever TLS fails, which \
                 anyone on the path can force; use {KNOWN}"
            ))),
            "verify-ca" => Err(Error::invalid_argument(
                "sslmode=verify-ca is spelled require with sslrootcert here (the chain is checked, \
                 the name is not); verify-full checks both",
            )),
            _ => Err(Error::invalid_argument(format!(
                "sslmode is {KNOWN}, got {text:?}"
            ))),
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where and how to reach the server. `Debug` leaves the credentials out.
#[derive(Clone)]
pub struct PostgresOptions {
    pub host: String,
    pub port: u16,
    pub user: Option<String>,
    pub password: Option<String>,
    pub database: String,
    /// Start of every table name; see [`DEFAULT_TABLE_PREFIX`].
    pub table_prefix: String,
    /// Bound of every call, from its start to its answer; see [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// TLS on the link (`sslmode`). `None` chooses when the store opens: see
    /// [`PostgresOptions::effective_ssl_mode`].
    pub ssl_mode: Option<SslMode>,
    /// CA certificates that the server's certificate must chain to (`sslrootcert`).
    pub ssl_root_cert: Option<PathBuf>,
    /// Decides on this clock instead of the server's. For tests that play the lease rules
    /// on a manual clock; a deployment leaves it unset.
    pub clock: Option<Arc<dyn WallClock>>,
}

impl fmt::Debug for PostgresOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresOptions")
            .field(
                "endpoint",
                &url_parts::shown(&self.host, self.port, &self.database),
            )
            .field("table_prefix", &self.table_prefix)
            .field("timeout", &self.timeout)
            .field("ssl_mode", &self.effective_ssl_mode())
            .field("ssl_root_cert", &self.ssl_root_cert)
            .field("injected_clock", &self.clock.is_some())
            .finish_non_exhaustive()
    }
}

impl PostgresOptions {
    /// The mode the store connects with: `ssl_mode` when set; otherwise `verify-full` with
    /// a root certificate, and without one `disable` for a loopback host, `require` for
    /// any other.
    pub fn effective_ssl_mode(&self) -> SslMode {
        match (self.ssl_mode, &self.ssl_root_cert) {
            (Some(mode), _) => mode,
            (None, Some(_)) => SslMode::VerifyFull,
            (None, None) if url_parts::is_loopback(&self.host) => SslMode::Disable,
            (None, None) => SslMode::Require,
        }
    }

    /// Reads a `postgres://` or `postgresql://` URL (see the module documentation). Errors
    /// never quote the URL, since it may carry a password.
    pub fn from_url(url: &str) -> Result<PostgresOptions> {
        let scheme = ["postgres://", "postgresql://"]
            .into_iter()
            .find(|scheme| url.starts_with(scheme))
            .ok_or_else(|| {
                Error::invalid_argument(
                    "a PostgreSQL lease store URL starts with postgres:// or postgresql://",
                )
            })?;
        let parts = url_parts::parse(url, scheme, 5432)?;
        let mut options = PostgresOptions {
            host: parts.host,
            port: parts.port,
            user: parts.user,
            password: parts.password,
            database: parts.database,
            table_prefix: DEFAULT_TABLE_PREFIX.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            ssl_mode: None,
            ssl_root_cert: None,
            clock: None,
        };
        for (name, value) in parts.options {
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
                "sslmode" => options.ssl_mode = Some(SslMode::parse(&value)?),
                "sslrootcert" => {
                    if value.is_empty() {
                        return Err(Error::invalid_argument(
                            "sslrootcert names a file of CA certificates: sslrootcert=/path/ca.pem",
                        ));
                    }
                    options.ssl_root_cert = Some(PathBuf::from(value));
                }
                other => {
                    return Err(Error::invalid_argument(format!(
                    "unknown {scheme} URL option {other:?}; known: prefix, timeout_ms, sslmode, sslrootcert"
                )))
                }
            }
        }
        if options.ssl_mode == Some(SslMode::Disable) && options.ssl_root_cert.is_some() {
            return Err(disabled_with_root_cert());
        }
        Ok(options)
    }
}

pub(super) fn disabled_with_root_cert() -> Error {
    Error::invalid_argument(
        "sslrootcert is given with sslmode=disable, which checks no certificate: \
         use sslmode=require or verify-full, or leave sslrootcert out",
    )
}

/// The certificates of an `sslrootcert` file (PEM, or one DER certificate); the reason
/// when it cannot be read or holds none.
pub(super) fn read_root_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("the sslrootcert file {} cannot be read: {e}", path.display()))?;
    let none = || {
        format!(
            "the sslrootcert file {} holds no certificate (a PEM \"BEGIN CERTIFICATE\" block, or one DER certificate)",
            path.display()
        )
    };
    let pem: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .filter_map(|cert| cert.ok())
        .collect();
    if !pem.is_empty() {
        return Ok(pem);
    }
    // A lone DER certificate is an ASN.1 SEQUENCE with a long-form length.
    if bytes.first() == Some(&0x30) && matches!(bytes.get(1), Some(0x81..=0x84)) {
        return Ok(vec![CertificateDer::from(bytes)]);
    }
    Err(none())
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The rustls settings of one new connection in `mode`, the root file read again so that
/// a rotated one takes effect without a restart.
pub(super) fn tls_config(mode: SslMode, root_cert: Option<&Path>) -> Result<ClientConfig, String> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS could not be set up: {e}"))?;
    let roots = || -> Result<Arc<RootCertStore>, String> {
        let mut roots = RootCertStore::empty();
        match root_cert {
            Some(path) => {
                for cert in read_root_certs(path)? {
                    roots.add(cert).map_err(|e| {
                        format!(
                            "the sslrootcert file {} holds a bad certificate: {e}",
                            path.display()
                        )
                    })?;
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        Ok(Arc::new(roots))
    };
    let webpki = || {
        WebPkiServerVerifier::builder_with_provider(roots()?, Arc::clone(&provider))
            .build()
            .map_err(|e| format!("TLS could not be set up: {e}"))
    };
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, root_cert) {
        (SslMode::VerifyFull, _) => webpki()?,
        (SslMode::Require, Some(_)) => Arc::new(ChainOnly(webpki()?)),
        (SslMode::Require, None) => Arc::new(Unchecked(provider)),
        (SslMode::Disable, _) => return Err("TLS is not used with sslmode=disable".into()),
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// `sslmode=require` without a root file, as libpq: encrypted, the certificate not checked
/// (the handshake's signature still is, so the link is bound to the key shown).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `sslmode=require` with a root file, as libpq: the chain is checked, the name is not.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
