//! The parts of a database URL (`scheme://user:password@host:port/database?options`) that
//! the network stores read alike. Errors name the part and never quote it: a URL may carry
//! a password.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::errors::{Error, Result};

/// A URL taken apart, its text percent-decoded; the options are left as written.
pub(crate) struct UrlParts<'a> {
    pub(crate) user: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) database: String,
    /// `name=value` pairs, each name once, values decoded.
    pub(crate) options: Vec<(&'a str, String)>,
}

/// Takes `url` apart after its `scheme` (`"postgres://"`), with `default_port`.
pub(crate) fn parse<'a>(url: &'a str, scheme: &str, default_port: u16) -> Result<UrlParts<'a>> {
    let rest = url
        .strip_prefix(scheme)
        .ok_or_else(|| Error::invalid_argument(format!("this URL starts with {scheme}")))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').ok_or_else(|| {
        Error::invalid_argument(format!(
            "a {scheme} URL names its database: {scheme}host:{default_port}/database"
        ))
    })?;
    let (user_info, host_port) = match authority.rsplit_once('@') {
        Some((user_info, host_port)) => (Some(user_info), host_port),
        None => (None, authority),
    };
    let (user, password) = match user_info {
        None => (None, None),
        Some(info) => match info.split_once(':') {
            Some((user, password)) => (
                Some(percent_decode(user, "user name", scheme)?),
                Some(percent_decode(password, "password", scheme)?),
            ),
            None => (Some(percent_decode(info, "user name", scheme)?), None),
        },
    };
    let (host, port) = split_host_port(host_port, scheme, default_port)?;
    let database = percent_decode(path, "database name", scheme)?;
    if database.is_empty() || database.contains('/') {
        return Err(Error::invalid_argument(format!(
            "a {scheme} URL names one database after the host: {scheme}host:{default_port}/database"
        )));
    }
    let mut options: Vec<(&str, String)> = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if options.iter().any(|(seen, _)| *seen == name) {
            return Err(Error::invalid_argument(format!(
                "the {scheme} URL option {name:?} is given twice"
            )));
        }
        options.push((name, percent_decode(value, name, scheme)?));
    }
    Ok(UrlParts {
        user,
        password,
        host,
        port,
        database,
        options,
    })
}

fn split_host_port(host_port: &str, scheme: &str, default_port: u16) -> Result<(String, u16)> {
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').ok_or_else(|| {
            Error::invalid_argument(format!("an IPv6 host in a {scheme} URL needs its closing ]"))
        })?;
        match after {
            "" => (host, None),
            _ => (
                host,
                Some(after.strip_prefix(':').ok_or_else(|| {
                    Error::invalid_argument(format!("a {scheme} URL has a : between the host and the port"))
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
        return Err(Error::invalid_argument(format!("a {scheme} URL names a host")));
    }
    let port = match port {
        None => default_port,
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
fn percent_decode(text: &str, what: &str, scheme: &str) -> Result<String> {
    crate::plumbing::percent_decode(text).ok_or_else(|| {
        Error::invalid_argument(format!("the {what} in the {scheme} URL is badly percent-encoded"))
    })
}

/// Whether `host` (as the URL writes it, without brackets) is this machine's loopback:
/// `localhost`, `127.0.0.0/8` or `::1`. A name that merely resolves there is not, since
/// what it resolves to can change.
pub(crate) fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
        || host.parse::<Ipv6Addr>().is_ok_and(|ip| ip == Ipv6Addr::LOCALHOST)
}

/// `host:port/database`, as errors and `Debug` show a server.
pub(crate) fn shown(host: &str, port: u16, database: &str) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}/{database}")
    } else {
        format!("{host}:{port}/{database}")
    }
}
