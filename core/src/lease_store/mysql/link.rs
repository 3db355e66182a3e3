//! A connection as one call uses it: nothing is sent once the call's deadline has passed,
//! and no socket wait outlasts it.

use std::os::unix::io::AsRawFd;

use mysql::prelude::FromRow;
use mysql::{FromRowError, Statement};

use super::*;

/// One call's hold on a pooled connection, with the call's deadline.
pub(super) struct Link<'c> {
    pub(super) conn: &'c mut Conn,
    pub(super) deadline: Deadline,
    /// Set by work that succeeded and yet left the connection unfit for another call (a
    /// prune after a write, cut short).
    pub(super) discard: bool,
}

impl Link<'_> {
    /// Before each round trip: fails when no time is left, and otherwise gives the socket's
    /// reads and writes what is. The driver sets these timeouts once per connection; set
    /// here, a statement can wait only for the rest of its call, not for a whole timeout
    /// of its own.
    fn arm(&mut self) -> Result<(), Failure> {
        let left = self.deadline.left().ok_or(Failure::Deadline)?;
        set_socket_timeouts(self.conn, left).map_err(|e| Failure::Db(mysql::Error::IoError(e)))
    }

    pub(super) fn query_drop(&mut self, sql: &str) -> Result<(), Failure> {
        self.arm()?;
        Ok(self.conn.query_drop(sql)?)
    }

    /// A statement of text only (no parameters), which needs no statement prepared.
    pub(super) fn query_opt<T: FromRow>(
        &mut self,
        sql: &str,
    ) -> Result<Vec<Result<T, FromRowError>>, Failure> {
        self.arm()?;
        Ok(self.conn.query_opt(sql)?)
    }

    /// The prepared statement, from the connection's cache when it was prepared before: a
    /// statement not yet prepared costs a round trip of its own, armed on its own.
    fn prepare(&mut self, sql: &str) -> Result<Statement, Failure> {
        self.arm()?;
        let statement = self.conn.prep(sql)?;
        self.arm()?;
        Ok(statement)
    }

    pub(super) fn exec_drop(&mut self, sql: &str, params: Params) -> Result<(), Failure> {
        let statement = self.prepare(sql)?;
        Ok(self.conn.exec_drop(&statement, params)?)
    }

    pub(super) fn exec_opt<T: FromRow>(
        &mut self,
        sql: &str,
        params: Params,
    ) -> Result<Vec<Result<T, FromRowError>>, Failure> {
        let statement = self.prepare(sql)?;
        Ok(self.conn.exec_opt(&statement, params)?)
    }

    pub(super) fn exec_first_opt<T: FromRow>(
        &mut self,
        sql: &str,
        params: Params,
    ) -> Result<Option<Result<T, FromRowError>>, Failure> {
        let statement = self.prepare(sql)?;
        Ok(self.conn.exec_first_opt(&statement, params)?)
    }
}

/// Sets the receive and send timeouts of the connection's socket (TLS or not, it is one
/// TCP socket) to `left`, which is at least a millisecond: zero would mean no timeout.
fn set_socket_timeouts(conn: &Conn, left: Duration) -> std::io::Result<()> {
    let timeval = libc::timeval {
        tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_usec: libc::suseconds_t::from(left.subsec_micros() as i32),
    };
    for option in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: the descriptor is the connection's open socket for as long as `conn` is
        // borrowed, and the option value is a `timeval` that lives across the call.
        let set = unsafe {
            libc::setsockopt(
                conn.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&timeval as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if set != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
