//! A moto S3 emulator of its own for each test that needs an S3-compatible server: memory
//! only, so every server starts empty, and an outage is a SIGSTOP (a restart would lose
//! every object). The program is `$GOTRY_MOTO_SERVER` (scripts/s3-server.sh installs it);
//! `GOTRY_SKIP_S3=1` skips, saying so. It names no type of the core, so the core's own unit
//! tests use it as well as the integration tests.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BUCKET: &str = "gotry-test";

pub struct MotoServer {
    child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
}

impl MotoServer {
    /// A fresh server holding one empty bucket, from `$GOTRY_MOTO_SERVER`; `None` when
    /// `GOTRY_SKIP_S3=1`, after a SKIPPED line on stderr. Without either, a panic that says
    /// how to get the server. The server lives until this is dropped or the thread that
    /// started it ends.
    pub fn start() -> Option<MotoServer> {
        // The test harness names each test's thread after the test.
        let test = std::thread::current().name().unwrap_or("this test").to_owned();
        if std::env::var("GOTRY_SKIP_S3").as_deref() == Ok("1") {
            // Straight to the process's stderr: the harness captures `eprintln!` of a
            // passing test, and a skip nobody sees is the silent kind.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: GOTRY_SKIP_S3=1 skips every test that needs an S3 server"
            );
            return None;
        }
        let program = std::env::var_os("GOTRY_MOTO_SERVER")
            .filter(|program| !program.is_empty())
            .unwrap_or_else(|| {
                panic!(
                    "{test} needs the moto S3 emulator: run `export GOTRY_MOTO_SERVER=$(scripts/s3-server.sh)` \
                     (or set GOTRY_SKIP_S3=1 to skip the tests that need it)"
                )
            });
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut command = Command::new(&program);
        command
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap());
        // A test binary that is killed runs no Drop: the server then dies with the
        // thread that started it instead of living on as an orphan.
        unsafe {
            command.pre_exec(|| match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("GOTRY_MOTO_SERVER={program:?} cannot be started: {e}"));
        let mut server = MotoServer { child, port, log };
        let started = Instant::now();
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!(
                    "moto_server ended ({status}) before answering:\n{}",
                    server.log_text()
                );
            }
            match server.create_bucket() {
                Ok(status) if status.starts_with("HTTP/1.1 200") => return Some(server),
                Ok(status) => panic!("moto_server refused to create the bucket: {status}"),
                Err(_) if started.elapsed() < Duration::from_secs(30) => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!(
                    "moto_server did not answer within 30 s ({e}):\n{}",
                    server.log_text()
                ),
            }
        }
    }

    /// The status line of a raw `PUT /bucket`: moto checks no signature by default.
    fn create_bucket(&self) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        write!(
            stream,
            "PUT /{BUCKET} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer.lines().next().unwrap_or_default().to_owned())
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// A store URL on this server, under `prefix`, with dummy credentials.
    pub fn url(&self, prefix: &str) -> String {
        format!(
            "s3://test:test@{BUCKET}/{prefix}?endpoint=http://127.0.0.1:{}&region=us-east-1",
            self.port
        )
    }

    fn pid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    /// Freezes the server: connections are still accepted, nothing is answered.
    pub fn stop(&self) {
        assert_eq!(unsafe { libc::kill(self.pid(), libc::SIGSTOP) }, 0);
    }

    pub fn resume(&self) {
        assert_eq!(unsafe { libc::kill(self.pid(), libc::SIGCONT) }, 0);
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        // SIGKILL ends a stopped process too.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
