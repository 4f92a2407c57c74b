//! Who a guest may reach: the hosts a plugin declares for its config, limited to those the
//! operator grants, and the address ranges that need a grant by address.

use anyhow::{Result, bail};
use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A host an operator grants or a plugin declares: `[http://]HOST[:PORT]`. HOST is a name, an
/// address, or a pattern `*.example.com` (any subdomain). Without a port it means the scheme's
/// default port (80 for http, 443 for https). Plain http is allowed only by a grant written with
/// `http://`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostPort {
    pub host: String,
    pub port: Option<u16>,
    /// Plain http is allowed too.
    pub http: bool,
}

impl HostPort {
    pub fn parse(text: &str) -> Result<Self> {
        let original = text.trim();
        let (http, text) = match original.split_once("://") {
            Some(("http", rest)) => (true, rest),
            Some(("https", rest)) => (false, rest),
            Some((other, _)) => bail!("{original:?}: only http:// and https:// hosts can be granted, not {other}://"),
            None => (false, original),
        };
        let text = text.trim_end_matches('/');
        let not_a_host = || anyhow::anyhow!("{original:?} is not a host, host:port or *.domain pattern");
        let (host, port) = if text.starts_with('[') {
            let end = text.find(']').ok_or_else(|| anyhow::anyhow!("unclosed [ in {original:?}"))?;
            let (host, after) = text.split_at(end + 1);
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':').ok_or_else(not_a_host)?),
            };
            (host, port)
        } else {
            match text.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (text, None),
            }
        };
        if host.starts_with('*') && !host.starts_with("*.") {
            bail!("{original:?}: a pattern must look like *.example.com");
        }
        let (pattern, bare) = match host.strip_prefix("*.") {
            Some(domain) => (true, domain),
            None => (false, host),
        };
        if bare.is_empty() || bare.contains('*') {
            return Err(not_a_host());
        }
        // The URL standard's host parser, as requests' URLs are parsed: names lower-cased and
        // internationalised ones in their ASCII (punycode) form, addresses normalised.
        let host = match url::Host::parse(bare).map_err(|e| anyhow::anyhow!("{}: {e}", not_a_host()))? {
            url::Host::Domain(domain) => domain,
            url::Host::Ipv4(ip) => ip.to_string(),
            url::Host::Ipv6(ip) => format!("[{ip}]"),
        };
        let host = if pattern { format!("*.{host}") } else { host };
        let port = port
            .map(|p| p.parse::<u16>().map_err(|_| anyhow::anyhow!("{original:?} has an invalid port")))
            .transpose()?;
        Ok(HostPort { host, port, http })
    }

    fn matches_host(&self, host: &str) -> bool {
        match self.host.strip_prefix("*.") {
            Some(domain) => {
                host.len() > domain.len() + 1
                    && host.ends_with(domain)
                    && host[..host.len() - domain.len()].ends_with('.')
            }
            None => self.host == host,
        }
    }

    fn matches(&self, host: &str, port: u16, default_port: u16) -> bool {
        self.matches_host(host) && self.port.unwrap_or(default_port) == port
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.http {
            f.write_str("http://")?;
        }
        match self.port {
            Some(p) => write!(f, "{}:{p}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

/// Addresses a guest may reach only when the operator granted the address itself: every range
/// of the IANA special-purpose address registries (IPv4 and IPv6) that is not globally
/// reachable (loopback, private, shared, link-local where cloud metadata lives, benchmarking,
/// documentation, reserved, ...), multicast, IPv6 outside global unicast (`2000::/3`), and the
/// deprecated site-local `fec0::/10`. An IPv6 form that carries an IPv4 address (mapped,
/// translated, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) is as internal as that IPv4 address;
/// IPv4-compatible `::/96` and Teredo are internal outright.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => is_internal_v6(v6),
    }
}

/// Whether `ip` is in `prefix/len`.
fn in_v4(ip: Ipv4Addr, prefix: [u8; 4], len: u32) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(prefix)) & mask
}

fn in_v6(ip: Ipv6Addr, prefix: u128, len: u32) -> bool {
    let mask = if len == 0 { 0 } else { u128::MAX << (128 - len) };
    u128::from(ip) & mask == prefix & mask
}

/// The IPv4 special-purpose registry's ranges that are not globally reachable, and multicast.
fn is_internal_v4(ip: Ipv4Addr) -> bool {
    const RANGES: [([u8; 4], u32); 16] = [
        ([0, 0, 0, 0], 8),          // "this network"
        ([10, 0, 0, 0], 8),         // private
        ([100, 64, 0, 0], 10),      // shared address space (carrier-grade NAT)
        ([127, 0, 0, 0], 8),        // loopback
        ([169, 254, 0, 0], 16),     // link-local: cloud metadata
        ([172, 16, 0, 0], 12),      // private
        ([192, 0, 0, 0], 24),       // IETF protocol assignments (DS-Lite, NAT64 discovery, ...)
        ([192, 0, 2, 0], 24),       // documentation (TEST-NET-1)
        ([192, 88, 99, 0], 24),     // deprecated 6to4 relay anycast
        ([192, 168, 0, 0], 16),     // private
        ([198, 18, 0, 0], 15),      // benchmarking
        ([198, 51, 100, 0], 24),    // documentation (TEST-NET-2)
        ([203, 0, 113, 0], 24),     // documentation (TEST-NET-3)
        ([224, 0, 0, 0], 4),        // multicast
        ([240, 0, 0, 0], 4),        // reserved
        ([255, 255, 255, 255], 32), // limited broadcast
    ];
    RANGES.iter().any(|&(prefix, len)| in_v4(ip, prefix, len))
}

/// The IPv6 special-purpose registry's ranges that are not globally reachable, what is outside
/// global unicast, and the IPv4 address inside the forms that carry one.
fn is_internal_v6(ip: Ipv6Addr) -> bool {
    let bits = u128::from(ip);
    let embedded = |shift: u32| Ipv4Addr::from((bits >> shift) as u32);
    // IPv4-mapped ::ffff:0:0/96 and IPv4-translated ::ffff:0:0:0/96: that IPv4 address.
    if in_v6(ip, 0xffff << 32, 96) || in_v6(ip, 0xffff << 48, 96) {
        return is_internal_v4(embedded(0));
    }
    // NAT64 well-known prefix 64:ff9b::/96: a NAT64 gateway reaches the IPv4 address inside.
    if in_v6(ip, 0x0064_ff9b << 96, 96) {
        return is_internal_v4(embedded(0));
    }
    // 6to4 2002::/16: the IPv4 address in bits 16..48 is where the packets go.
    if in_v6(ip, 0x2002 << 112, 16) {
        return is_internal_v4(embedded(80));
    }
    // Outside 2000::/3 nothing is global unicast: ::/96 (IPv4-compatible, unspecified,
    // loopback), 64:ff9b:1::/48 (local translation), 100::/64 (discard), 5f00::/16 (SRv6),
    // fc00::/7 (unique local), fe80::/10 (link-local), fec0::/10 (site-local), ff00::/8
    // (multicast).
    if !in_v6(ip, 0x2000 << 112, 3) {
        return true;
    }
    const RANGES: [(u128, u32); 4] = [
        (0x2001 << 112, 23),     // IETF protocol assignments (Teredo, benchmarking, ORCHID, ...)
        (0x2001_0db8 << 96, 32), // documentation
        (0x3fff << 112, 20),     // documentation
        (0x2001_0002 << 96, 48), // benchmarking (inside 2001::/23)
    ];
    // Globally reachable exceptions inside 2001::/23: PCP and TURN anycast, AMT, AS112,
    // ORCHIDv2 and drone remote ID.
    const GLOBAL: [(u128, u32); 7] = [
        ((0x2001_0001 << 96) | 1, 128),             // PCP anycast
        ((0x2001_0001 << 96) | 2, 128),             // TURN anycast
        ((0x2001_0001 << 96) | 3, 128),             // DNS-SD service registration
        (0x2001_0003 << 96, 32),                    // AMT
        ((0x2001_0004 << 96) | (0x0112 << 80), 48), // AS112-v6
        (0x2001_0020 << 96, 28),                    // ORCHIDv2
        (0x2001_0030 << 96, 28),                    // drone remote ID
    ];
    if GLOBAL.iter().any(|&(prefix, len)| in_v6(ip, prefix, len)) {
        return false;
    }
    RANGES.iter().any(|&(prefix, len)| in_v6(ip, prefix, len))
}

/// Who may be reached: what the plugin declared, limited to what the operator granted.
#[derive(Debug, Clone, Default)]
pub struct EgressPolicy {
    declared: BTreeSet<HostPort>,
    granted: BTreeSet<HostPort>,
}

impl EgressPolicy {
    pub fn new(declared: impl IntoIterator<Item = HostPort>, granted: impl IntoIterator<Item = HostPort>) -> Self {
        EgressPolicy { declared: declared.into_iter().collect(), granted: granted.into_iter().collect() }
    }

    pub fn declared(&self) -> impl Iterator<Item = &HostPort> {
        self.declared.iter()
    }
    pub fn granted(&self) -> impl Iterator<Item = &HostPort> {
        self.granted.iter()
    }

    /// Declared hosts the operator has not granted: requests to them will be denied. A missing
    /// port stands for a scheme's default port, 80 or 443. A declared pattern counts as granted
    /// when the operator granted part of it (`api.example.com` of `*.example.com`): the rest of
    /// the pattern stays denied request by request.
    pub fn ungranted(&self) -> Vec<&HostPort> {
        let default = |p: Option<u16>| p.is_none_or(|p| p == 80 || p == 443);
        let covers = |g: &HostPort, d: &HostPort| {
            (!d.http || g.http)
                && (g.host == d.host || g.matches_host(&d.host) || d.matches_host(&g.host))
                && (g.port == d.port || (g.port.is_none() && default(d.port)) || (d.port.is_none() && default(g.port)))
        };
        self.declared.iter().filter(|d| !self.granted.iter().any(|g| covers(g, d))).collect()
    }

    /// `Ok` when the URL may be requested, else why not. Names are checked again once resolved
    /// (see [`CheckedResolver`](super::client::CheckedResolver)).
    pub fn check(&self, url: &url::Url) -> Result<(), String> {
        let default_port = match url.scheme() {
            "http" => 80,
            "https" => 443,
            other => return Err(format!("scheme {other:?} is not allowed (only http and https)")),
        };
        // Borrowed from the URL but for IPv6 (every request is checked; an error's text is
        // built only for a refusal). The URL parser has lowercased a domain of http(s) already,
        // and writes an IPv4 address as `Ipv4Addr` does.
        let host: std::borrow::Cow<str> = match url.host() {
            Some(url::Host::Domain(d)) if !d.bytes().any(|b| b.is_ascii_uppercase()) => d.into(),
            Some(url::Host::Domain(d)) => d.to_ascii_lowercase().into(),
            Some(url::Host::Ipv4(_)) => url.host_str().unwrap_or_default().into(),
            Some(url::Host::Ipv6(ip)) => format!("[{ip}]").into(),
            None => return Err(format!("{url} has no host")),
        };
        let port = url.port().unwrap_or(default_port);
        let target = || format!("{host}:{port}");
        if !self.declared.iter().any(|d| d.matches(&host, port, default_port)) {
            return Err(format!("{} is not among the hosts the plugin declared for this config", target()));
        }
        let mut grants = self.granted.iter().filter(|g| g.matches(&host, port, default_port)).peekable();
        if grants.peek().is_none() {
            let target = target();
            let how = if url.scheme() == "http" { format!("http://{target}") } else { target.clone() };
            return Err(format!("{target} is not granted by the operator (grant it with --allow-host {how})"));
        }
        if url.scheme() == "http" && !grants.any(|g| g.http) {
            let target = target();
            return Err(format!(
                "plain http to {target} is not granted, only https (grant it with --allow-host http://{target})"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(declared: &[&str], granted: &[&str]) -> EgressPolicy {
        EgressPolicy::new(
            declared.iter().map(|h| HostPort::parse(h).unwrap()),
            granted.iter().map(|h| HostPort::parse(h).unwrap()),
        )
    }

    #[test]
    fn host_port_parsing() {
        let hp = |host: &str, port, http| HostPort { host: host.into(), port, http };
        assert_eq!(HostPort::parse("Example.com:8080").unwrap(), hp("example.com", Some(8080), false));
        assert_eq!(HostPort::parse("[::1]:80").unwrap(), hp("[::1]", Some(80), false));
        assert_eq!(HostPort::parse("http://127.0.0.1:9/").unwrap(), hp("127.0.0.1", Some(9), true));
        assert_eq!(HostPort::parse("*.x.io").unwrap(), hp("*.x.io", None, false));
        assert_eq!(HostPort::parse("api.x.io").unwrap().port, None);
        assert!(HostPort::parse("ftp://x").is_err());
        assert!(HostPort::parse("a*.x.io").is_err());
        assert!(HostPort::parse("*x.io").is_err());
        assert!(HostPort::parse("x:99999").is_err());
        assert!(HostPort::parse("[::1]x").is_err());
        assert!(HostPort::parse("a b").is_err() && HostPort::parse("u@h").is_err() && HostPort::parse("h/p").is_err());
        // Internationalised names are kept in the ASCII form requests' URLs use; no slicing
        // inside a character.
        assert_eq!(HostPort::parse("Bücher.example:8443").unwrap(), hp("xn--bcher-kva.example", Some(8443), false));
        assert_eq!(HostPort::parse("*.bücher.example").unwrap().host, "*.xn--bcher-kva.example");
        assert!(HostPort::parse("é").is_ok());
        assert!(HostPort::parse("*é").is_err());
    }

    #[test]
    fn policy_is_declared_and_granted() {
        let p = policy(&["127.0.0.1:8080", "api.x.io"], &["http://127.0.0.1:8080"]);
        assert!(p.check(&"http://127.0.0.1:8080/items".parse().unwrap()).is_ok());
        let e = p.check(&"https://api.x.io/v1".parse().unwrap()).unwrap_err();
        assert!(e.contains("--allow-host api.x.io:443"), "{e}");
        let e = p.check(&"http://127.0.0.1:9999/".parse().unwrap()).unwrap_err();
        assert!(e.contains("not among the hosts the plugin declared"), "{e}");
        assert!(p.check(&"ftp://127.0.0.1:8080/".parse().unwrap()).is_err());
        assert_eq!(p.ungranted().len(), 1);
        // A grant without a port covers a declaration of the default port, and the reverse.
        assert!(policy(&["api.x.io:443"], &["api.x.io"]).ungranted().is_empty());
        assert!(policy(&["api.x.io"], &["api.x.io:443"]).ungranted().is_empty());
        assert_eq!(policy(&["api.x.io:8443"], &["api.x.io"]).ungranted().len(), 1);
        // A pattern is covered by a grant of part of it, and by a wider pattern.
        assert!(policy(&["*.x.io"], &["api.x.io"]).ungranted().is_empty());
        assert!(policy(&["api.x.io"], &["*.x.io"]).ungranted().is_empty());
        assert_eq!(policy(&["*.x.io"], &["api.y.io"]).ungranted().len(), 1);
    }

    #[test]
    fn plain_http_needs_an_http_grant() {
        let p = policy(&["127.0.0.1:8080"], &["127.0.0.1:8080"]);
        let e = p.check(&"http://127.0.0.1:8080/".parse().unwrap()).unwrap_err();
        assert!(e.contains("--allow-host http://127.0.0.1:8080"), "{e}");
        let p = policy(&["127.0.0.1:8080"], &["http://127.0.0.1:8080"]);
        assert!(p.check(&"http://127.0.0.1:8080/".parse().unwrap()).is_ok());
    }

    #[test]
    fn a_urls_host_is_matched_in_the_form_the_grants_are_written_in() {
        // A domain in capitals, an IPv6 address (bracketed), and an IPv4 one written unusually.
        let p = policy(
            &["api.x.io", "[::1]:8080", "127.0.0.1:9"],
            &["api.x.io", "http://[::1]:8080", "http://127.0.0.1:9"],
        );
        assert!(p.check(&"https://API.X.io/v1".parse().unwrap()).is_ok());
        assert!(p.check(&"http://[0:0::1]:8080/".parse().unwrap()).is_ok());
        assert!(p.check(&"http://127.0.0.01:9/".parse().unwrap()).is_ok());
        let e = p.check(&"http://[::2]:8080/".parse().unwrap()).unwrap_err();
        assert!(e.starts_with("[::2]:8080 is not among the hosts"), "{e}");
        let e = p.check(&"http://api.x.io/".parse().unwrap()).unwrap_err();
        assert!(e.contains("plain http to api.x.io:80 is not granted"), "{e}");
    }

    #[test]
    fn wildcards_match_subdomains_only() {
        let p = policy(&["*.x.io"], &["*.x.io"]);
        assert!(p.check(&"https://api.x.io/".parse().unwrap()).is_ok());
        assert!(p.check(&"https://a.b.x.io/".parse().unwrap()).is_ok());
        assert!(p.check(&"https://x.io/".parse().unwrap()).is_err());
        assert!(p.check(&"https://evilx.io/".parse().unwrap()).is_err());
        let narrow = policy(&["*.x.io"], &["api.x.io"]);
        assert!(narrow.check(&"https://api.x.io/".parse().unwrap()).is_ok());
        assert!(narrow.check(&"https://other.x.io/".parse().unwrap()).is_err());
    }

    #[test]
    fn internal_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "198.19.255.254",
            "198.51.100.7",
            "203.0.113.9",
            "192.88.99.1",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fd00:ec2::254",
            "fe80::1",
            "fec0::1",
            "feff::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0:169.254.169.254",
            // NAT64 of the metadata address: a NAT64 gateway takes it there.
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::1",
            // IPv4-compatible: deprecated, never global.
            "::169.254.169.254",
            "::8.8.8.8",
            // 6to4 of internal addresses.
            "2002:a9fe:a9fe::1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "100::1",
            "2001::1",
            "2001:2::1",
            "2001:db8::1",
            "3fff::1",
            "5f00::1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "198.17.255.255",
            "198.20.0.0",
            "100.128.0.1",
            "192.0.3.1",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "::ffff:8.8.8.8",
            "2001:4860:4860::8888",
            "2001:1::1",
            "2001:4:112::1",
            "2620:4f:8000::1",
        ] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn an_internationalised_grant_matches_its_url() {
        let p = policy(&["bücher.example"], &["BÜCHER.example"]);
        assert!(p.check(&"https://bücher.example/x".parse().unwrap()).is_ok());
        assert!(p.ungranted().is_empty());
    }

    #[test]
    fn default_ports() {
        let p = policy(&["api.x.io"], &["api.x.io:443"]);
        assert!(p.check(&"https://api.x.io/".parse().unwrap()).is_ok());
        assert!(p.check(&"http://api.x.io/".parse().unwrap()).is_err());
    }
}
