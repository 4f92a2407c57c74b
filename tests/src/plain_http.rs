//! One HTTP/1.1 request over a plain socket, for tests that need no client library.

use anyhow::{Context, Result, bail};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One plain HTTP/1.1 request; the status code.
pub fn request(addr: SocketAddr, method: &str, path: &str) -> Result<u16> {
    Ok(exchange(addr, method, path, &[])?.0)
}

/// One plain HTTP/1.1 request with a body; the status code and the response body.
pub fn exchange(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let length = body.len();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    )?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").context("an HTTP response without a header end")?;
    let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
    let status = head.split_whitespace().nth(1).context("an empty HTTP response")?.parse()?;
    let raw = &response[split + 4..];
    let body = if head.contains("transfer-encoding: chunked") { dechunk(raw)? } else { raw.to_vec() };
    Ok((status, body))
}

fn dechunk(mut raw: &[u8]) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n").context("a chunk without a size line")?;
        let size_text = String::from_utf8_lossy(&raw[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if raw.len() < size + 2 {
            bail!("a chunk shorter than its size");
        }
        body.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}
