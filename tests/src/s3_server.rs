//! A real S3-protocol server on loopback for tests and benchmarks: moto's server from PyPI
//! (installed by `just setup-s3-server` into target/tools/moto), started on a free port.

use crate::plain_http::request;
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
    /// Starts the server and waits (bounded) until it answers.
    pub fn start() -> Result<S3Server> {
        let binary = moto_server();
        if !binary.exists() {
            bail!("{} is missing: run `just setup-s3-server` (`just test` does)", binary.display());
        }
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let child = Command::new(&binary)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        let mut server = S3Server { child, addr };
        let deadline = Instant::now() + Duration::from_secs(60);
        while request(addr, "GET", "/").is_err() {
            if let Some(status) = server.child.try_wait()? {
                bail!("moto_server exited at start ({status})");
            }
            if Instant::now() > deadline {
                bail!("moto_server did not answer on {addr} within 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
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

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
