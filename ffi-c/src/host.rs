//! The host's callbacks that the core keeps (the snapshot of files the host has open, the
//! fold check and the event handler of a router), and the failure a callback reports.

use std::ffi::{c_char, c_void};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use gotry_core::{Error, HostSnapshot};

/// Bytes of the message buffer a `GotrySnapshotFn` may fill, its NUL included.
pub const GOTRY_HOST_MESSAGE_BUFFER_LEN: usize = 1024;

/// Reads, through the host's own SQLite, a file of a tenant root that the host has open, for
/// a copy (`gotry_epoch_copies_new_with_snapshot`, `GotryRouterOptions.snapshot`).
///
/// The library never opens a file that another descriptor of the process has open: POSIX
/// locks belong to the process, so its own SQLite (a copy bundled in this library, not the
/// host's) would drop the host's locks on close and could delete the WAL the host still
/// writes to. It asks this function instead: write a transaction-consistent, self-contained
/// image of the database at `source` to the new file `image`, page for page
/// (`sqlite3_backup_*` from the host's connection into a connection on `image`, or
/// `sqlite3_serialize`): a copy stores only the blocks that differ from its lineage's last
/// copy, and `VACUUM INTO`, accepted too, lays every table out anew, so most copies then
/// store most of the database again. Both paths
/// are NUL-terminated (`source_len` and `image_len` bytes before the NUL) and valid during
/// the call only; `image` does not exist yet, in a scratch folder beside the tenant root.
///
/// Return 0 when the image is written. Any other value fails the copy with
/// `GOTRY_STATUS_HOST_CALLBACK_FAILED` (`gotry_error_host_code` gives the value back, so a
/// SQLite result code survives); the function may first write a NUL-terminated message for
/// people into `message` (`message_capacity` bytes, `GOTRY_HOST_MESSAGE_BUFFER_LEN`, holding
/// an empty string on entry), which the error's message quotes.
///
/// It runs on the thread that takes the copy, before that call returns: the caller of
/// `gotry_epoch_copies_write_copy`, or for a router its copier thread (`Async`), the thread
/// finishing a call (`Strict`), or the caller of `gotry_router_handoff` or
/// `gotry_router_close`. Copies of different tenants run in parallel, so it may run on
/// several threads at once (one file at a time for one copy): `user_data` must be usable
/// from any thread. Never let a C++ exception escape it, and do not call the same copies or
/// router for the same tenant from it (that tenant's copy holds its turn).
pub type GotrySnapshotFn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        source: *const c_char,
        source_len: usize,
        image: *const c_char,
        image_len: usize,
        message: *mut c_char,
        message_capacity: usize,
    ) -> i32,
>;

/// What a host's callback reported: the value it returned and the message it wrote. Kept
/// inside the core's `Error::Host`, and found again by downcasting when the error reaches C.
#[derive(Debug)]
pub(crate) struct HostFailure {
    pub(crate) code: i32,
    source: String,
    message: String,
}

impl fmt::Display for HostFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the host's snapshot of {} returned {}", self.source, self.code)?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for HostFailure {}

/// The value a host's callback returned, when `error` is its failure.
pub(crate) fn host_code(error: &Error) -> Option<i32> {
    match error {
        Error::Host(source) => source.downcast_ref::<HostFailure>().map(|f| f.code),
        _ => None,
    }
}

/// A pointer the host lends to its own callback; the library never reads it.
#[derive(Clone, Copy)]
pub(crate) struct UserData(pub(crate) *mut c_void);

// SAFETY: the header tells the host that its callbacks run on the library's threads and that
// `user_data` must be usable from any thread; the library only passes it back.
unsafe impl Send for UserData {}
unsafe impl Sync for UserData {}

pub(crate) fn nul_terminated(path: &Path) -> Vec<u8> {
    let bytes = path.as_os_str().as_encoded_bytes();
    let mut text = Vec::with_capacity(bytes.len() + 1);
    text.extend_from_slice(bytes);
    text.push(0);
    text
}

/// The core's snapshot function over a C one. With a gate, it refuses once the gate is
/// closed (the router that owned it was freed).
pub(crate) fn host_snapshot(
    call: unsafe extern "C" fn(
        *mut c_void,
        *const c_char,
        usize,
        *const c_char,
        usize,
        *mut c_char,
        usize,
    ) -> i32,
    user_data: *mut c_void,
    gate: Option<Arc<CallbackGate>>,
) -> HostSnapshot {
    let user_data = UserData(user_data);
    Arc::new(move |source: &Path, image: &Path| {
        let _turn = match &gate {
            Some(gate) => Some(gate.enter().ok_or_else(|| {
                Error::Host(
                    format!(
                        "{} was not copied: the router that owned the host's snapshot function was freed",
                        source.display()
                    )
                    .into(),
                )
            })?),
            None => None,
        };
        let user_data = user_data;
        let source_text = nul_terminated(source);
        let image_text = nul_terminated(image);
        let mut message = vec![0u8; GOTRY_HOST_MESSAGE_BUFFER_LEN];
        // SAFETY: the host gave this function for this purpose; every buffer lives until the
        // call returns, and `message` is writable for its whole length.
        let code = unsafe {
            call(
                user_data.0,
                source_text.as_ptr().cast(),
                source_text.len() - 1,
                image_text.as_ptr().cast(),
                image_text.len() - 1,
                message.as_mut_ptr().cast(),
                message.len(),
            )
        };
        if code == 0 {
            return Ok(());
        }
        // A message without its NUL is taken whole, up to the buffer's end.
        let end = message.iter().position(|&b| b == 0).unwrap_or(message.len());
        Err(Error::Host(Box::new(HostFailure {
            code,
            source: source.display().to_string(),
            message: String::from_utf8_lossy(&message[..end]).into_owned(),
        })))
    })
}

/// Lets a router's callbacks run until the router is freed, and then never again: `close`
/// waits for the calls in progress (on other threads) and refuses every later one. The core
/// may keep running pieces of a freed router for a while (a call still held by the host, a
/// renewal in flight), so this is what makes "never called after free" hold.
#[derive(Default)]
pub(crate) struct CallbackGate {
    state: Mutex<GateState>,
    idle: Condvar,
}

#[derive(Default)]
struct GateState {
    closed: bool,
    running: usize,
}

/// One callback in progress; ends it when dropped.
pub(crate) struct Turn<'a>(&'a CallbackGate);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.running -= 1;
        if state.running == 0 {
            self.0.idle.notify_all();
        }
    }
}

impl CallbackGate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        // The state is two plain values, consistent after every critical section.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A turn for one callback, or None once the gate is closed.
    pub(crate) fn enter(&self) -> Option<Turn<'_>> {
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        state.running += 1;
        Some(Turn(self))
    }

    /// Refuses every later callback and waits for those in progress.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        while state.running > 0 {
            state = self
                .idle
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn refuse(
        user_data: *mut c_void,
        source: *const c_char,
        source_len: usize,
        _image: *const c_char,
        _image_len: usize,
        message: *mut c_char,
        message_capacity: usize,
    ) -> i32 {
        // SAFETY: the adapter passes a NUL-terminated path and a writable buffer.
        unsafe {
            assert_eq!(*source.add(source_len), 0);
            assert_eq!(message_capacity, GOTRY_HOST_MESSAGE_BUFFER_LEN);
            assert_eq!(*message, 0, "the buffer starts empty");
            let text = b"database is locked\0";
            std::ptr::copy_nonoverlapping(text.as_ptr().cast(), message, text.len());
            *user_data.cast::<i32>() += 1;
        }
        5
    }

    #[test]
    fn a_refusal_keeps_the_host_code_and_message() {
        let mut calls = 0i32;
        let snapshot = host_snapshot(refuse, (&mut calls as *mut i32).cast(), None);
        let error = snapshot(Path::new("/r/gotry-state.db"), Path::new("/s/000000")).unwrap_err();
        assert_eq!(host_code(&error), Some(5));
        let text = error.to_string();
        assert!(
            text.contains("/r/gotry-state.db") && text.contains("database is locked"),
            "{text}"
        );
        assert_eq!(error.code_str(), "HOST_CALLBACK");
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_closed_gate_refuses_without_calling() {
        let mut calls = 0i32;
        let gate = Arc::new(CallbackGate::default());
        let snapshot = host_snapshot(refuse, (&mut calls as *mut i32).cast(), Some(gate.clone()));
        gate.close();
        let error = snapshot(Path::new("/r/db"), Path::new("/s/img")).unwrap_err();
        assert!(matches!(error, Error::Host(_)));
        assert_eq!(host_code(&error), None);
        assert_eq!(calls, 0);
    }
}
