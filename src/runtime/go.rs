//! Go services' own profiles: where their net/http/pprof endpoint listens, read from the
//! listening sockets of the process's network namespace (/proc/<pid>/net/tcp and tcp6),
//! and the URLs devprof asks. Pure: text in, addresses out.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A listening TCP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    pub ip: IpAddr,
    pub port: u16,
}

/// The kernel's state code of a listening socket in /proc/net/tcp.
const LISTEN: &str = "0A";

/// The listening sockets in the text of /proc/<pid>/net/tcp and/or tcp6 (concatenated;
/// header lines and anything unreadable are skipped), each once, in order.
pub fn listeners(text: &str) -> Vec<Listener> {
    let mut out: Vec<Listener> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(_slot), Some(local), Some(_remote), Some(state)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if state != LISTEN {
            continue;
        }
        let Some((ip, port)) = local.split_once(':') else {
            continue;
        };
        let (Some(ip), Ok(port)) = (kernel_ip(ip), u16::from_str_radix(port, 16)) else {
            continue;
        };
        let l = Listener { ip, port };
        if !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

/// An address as /proc/net/tcp{,6} prints it: 32-bit words in the host's byte order.
fn kernel_ip(hex: &str) -> Option<IpAddr> {
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16).ok()?;
        Some(w.to_ne_bytes())
    };
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(0)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            let v6 = Ipv6Addr::from(bytes);
            Some(match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            })
        }
        _ => None,
    }
}

/// The base URL (`http://127.0.0.1:6060`) that reaches a listener from inside its network
/// namespace: a wildcard address is reached through the loopback interface.
pub fn base_url(l: &Listener) -> String {
    match l.ip {
        IpAddr::V4(ip) if ip.is_unspecified() => format!("http://127.0.0.1:{}", l.port),
        IpAddr::V4(ip) => format!("http://{ip}:{}", l.port),
        IpAddr::V6(ip) if ip.is_unspecified() => format!("http://[::1]:{}", l.port),
        IpAddr::V6(ip) => format!("http://[{ip}]:{}", l.port),
    }
}

/// The URLs worth probing for net/http/pprof, the usual ports first (6060: Go's
/// convention and op-node's and geth's default), one per port.
pub fn candidates(listeners: &[Listener]) -> Vec<String> {
    let mut ordered: Vec<&Listener> = listeners.iter().collect();
    ordered.sort_by_key(|l| (l.port != 6060, l.port));
    let mut urls: Vec<String> = Vec::new();
    let mut ports: Vec<u16> = Vec::new();
    for l in ordered {
        if !ports.contains(&l.port) {
            ports.push(l.port);
            urls.push(base_url(l));
        }
    }
    urls
}

/// The CPU profile of `seconds` seconds.
pub fn cpu_url(base: &str, seconds: u64) -> String {
    format!("{base}/debug/pprof/profile?seconds={seconds}")
}

/// The heap profile (all four sample types: alloc and inuse, objects and space).
pub fn heap_url(base: &str) -> String {
    format!("{base}/debug/pprof/heap")
}

/// The index page, which answers 200 where net/http/pprof is served.
pub fn index_url(base: &str) -> String {
    format!("{base}/debug/pprof/")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/net/tcp and tcp6 of demo-go (net/http/pprof on 127.0.0.1:6060, one
    /// connection established to it) with a wildcard listener added on 8545 and 9090.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:17AC 00000000:0000 0A 00000000:00000000 00:00000000 00000000 10001        0 123456 1 0000000000000000 100 0 0 10 0
   1: 00000000:2161 00000000:0000 0A 00000000:00000000 00:00000000 00000000 10001        0 123457 1 0000000000000000 100 0 0 10 0
   2: 0100007F:17AC 0100007F:C350 01 00000000:00000000 00:00000000 00000000 10001        0 123458 1 0000000000000000 20 4 30 10 -1
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:2382 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 10001        0 2 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:17AD 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 10001        0 3 1 0000000000000000 100 0 0 10 0
";

    #[test]
    fn listening_sockets_from_proc_net_tcp() {
        let l = listeners(TCP);
        let urls: Vec<String> = l.iter().map(base_url).collect();
        assert_eq!(
            urls,
            [
                "http://127.0.0.1:6060",
                "http://127.0.0.1:8545",
                "http://[::1]:9090",
                "http://[::1]:6061"
            ]
        );
        assert_eq!(
            candidates(&l),
            [
                "http://127.0.0.1:6060",
                "http://[::1]:6061",
                "http://127.0.0.1:8545",
                "http://[::1]:9090"
            ]
        );
        assert!(listeners("garbage\n 0: zz:zz 0:0 0A\n").is_empty());
    }

    #[test]
    fn profile_urls() {
        let base = "http://127.0.0.1:6060";
        assert_eq!(
            cpu_url(base, 10),
            "http://127.0.0.1:6060/debug/pprof/profile?seconds=10"
        );
        assert_eq!(heap_url(base), "http://127.0.0.1:6060/debug/pprof/heap");
        assert_eq!(index_url(base), "http://127.0.0.1:6060/debug/pprof/");
    }
}
