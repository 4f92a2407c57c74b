//! A real S3-protocol server on loopback for tests and benchmarks: moto's server from PyPI
//! (installed by `just setup-s3-server` into target/tools/moto), started on a free port.

use crate::plain_http::{exchange, request};
use anyhow::{Context, Result, bail};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running moto server; killed on drop.
pub struct S3Server {
    child: Child,
    addr: SocketAddr,
}

fn moto_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").join("target/tools/moto/bin/moto_server")
}

impl S3Server {
    /// Starts the server and waits (bounded) until it answers as moto does.
    ///
    /// The port is picked free and then handed to moto, so another test's server can take it in
    /// between: moto then exits at start ("Address already in use") while the other server
    /// answers on the port. So an answer counts only if it is moto's bucket listing, and a moto
    /// that exits is started again on another port.
    pub fn start() -> Result<S3Server> {
        S3Server::start_on(|| Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port()))
    }

    /// `start`, with the port of each attempt from `pick_port`.
    fn start_on(mut pick_port: impl FnMut() -> Result<u16>) -> Result<S3Server> {
        let binary = moto_server();
        if !binary.exists() {
            bail!("{} is missing: run `just setup-s3-server` (`just test` does)", binary.display());
        }
        const ATTEMPTS: usize = 5;
        for attempt in 1..=ATTEMPTS {
            let port = pick_port()?;
            let addr: SocketAddr = ([127, 0, 0, 1], port).into();
            let child = Command::new(&binary)
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .with_context(|| format!("start {}", binary.display()))?;
            let mut server = S3Server { child, addr };
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Some(status) = server.child.try_wait()? {
                    if attempt == ATTEMPTS {
                        bail!("moto_server exited at start ({status}) {ATTEMPTS} times, each on a new free port");
                    }
                    break;
                }
                if answers_as_moto(addr) {
                    return Ok(server);
                }
                if Instant::now() > deadline {
                    bail!("moto_server did not answer on {addr} within 60 s");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        unreachable!("the last attempt returns or fails")
    }

    /// Creates a bucket (a plain `PUT /bucket`).
    pub fn bucket(&self, name: &str) -> Result<()> {
        let status = request(self.addr, "PUT", &format!("/{name}"))?;
        if status != 200 {
            bail!("creating bucket {name} answered {status}");
        }
        Ok(())
    }

    /// The environment an S3 client needs to reach this server (as a user would set it).
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT", format!("http://{}", self.addr)),
            ("AWS_ALLOW_HTTP", "true".to_string()),
            ("AWS_ACCESS_KEY_ID", "test".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

/// Whether `addr` answers `GET /` with an S3 bucket listing (and not some other test's server).
fn answers_as_moto(addr: SocketAddr) -> bool {
    matches!(exchange(addr, "GET", "/", &[]), Ok((200, body)) if String::from_utf8_lossy(&body).contains("<ListAllMyBucketsResult"))
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// The race CI met: another server takes the port picked for moto before moto binds it, and
    /// answers `PUT /lake` with 404. The server must come up on another port and be moto.
    #[test]
    fn a_port_taken_before_moto_binds_it_is_given_up_for_another() {
        let squatter = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = squatter.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut stream in squatter.incoming().flatten() {
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
            }
        });
        let mut ports = vec![taken];
        let server = S3Server::start_on(|| match ports.pop() {
            Some(port) => Ok(port),
            None => Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port()),
        })
        .unwrap();
        assert_ne!(server.addr.port(), taken);
        server.bucket("lake").unwrap();
    }
}
