//! Measures a container endpoint's clock against this host's, through exec: each exchange
//! runs `date +%s%N` in a container of the endpoint between two readings of the host's
//! clock (`profile::clock` does the arithmetic). Over several endpoints, what a container
//! stamps (its log lines, its kernel's sample times) is on its endpoint's clock.

use crate::docker::{ContainerShell, Shell};
use crate::error::{Error, Result};
use crate::profile::clock::{estimate, parse_reading, ClockOffset, Exchange};

/// Exchanges per measurement: the shortest round trip of these bounds the offset.
pub const EXCHANGES: usize = 8;

fn host_now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or_default()
}

/// The clock of `shell`'s container against this host's, from `EXCHANGES` exchanges.
pub async fn measure(shell: &Shell) -> Result<ClockOffset> {
    let mut exchanges = Vec::with_capacity(EXCHANGES);
    let unreadable = |what: String| Error::Docker {
        action: format!("read the clock of {}", shell.container()),
        reason: what,
    };
    for _ in 0..EXCHANGES {
        let sent_ns = host_now_ns();
        let out = shell.run(&["date", "+%s%N"]).await?;
        let received_ns = host_now_ns();
        let remote_ns = parse_reading(crate::text::first_line(&out.stdout)).ok_or_else(|| {
            unreadable(format!(
                "`date +%s%N` printed {:?}, not nanoseconds (a date without %N, e.g. busybox's?)",
                crate::text::truncate(out.stdout.trim(), 40)
            ))
        })?;
        exchanges.push(Exchange {
            sent_ns,
            remote_ns,
            received_ns,
        });
    }
    estimate(&exchanges).ok_or_else(|| unreadable("the host's clock ran backwards".into()))
}
