//! How far a container endpoint's clock is from this host's, from round-trip exchanges
//! (as NTP does): the host notes its time, asks the endpoint's clock (an exec of
//! `date +%s%N` in a container), and notes its time again when the answer arrives. If the
//! two clocks agreed, the remote reading would fall between the two host readings; the
//! offset is the remote reading minus their midpoint, and it is wrong by at most half the
//! round trip (the reading may have been taken anywhere within it). Of several exchanges
//! the one with the shortest round trip bounds the offset best.

use serde::{Deserialize, Serialize};

/// One exchange, in nanoseconds since the Unix epoch: the host's clock when the question
/// left, the endpoint's answer, the host's clock when the answer arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    pub sent_ns: i128,
    pub remote_ns: i128,
    pub received_ns: i128,
}

impl Exchange {
    pub fn round_trip_ns(&self) -> i128 {
        self.received_ns - self.sent_ns
    }

    /// The endpoint's clock minus the host's, by this exchange alone.
    pub fn offset_ns(&self) -> i128 {
        // The midpoint without overflow of the sum.
        let midpoint = self.sent_ns + (self.received_ns - self.sent_ns) / 2;
        self.remote_ns - midpoint
    }
}

/// An endpoint's clock against the host's: `offset_ms` to add to a host instant to get
/// the endpoint's reading of it, known to within `uncertainty_ms` either way.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockOffset {
    pub offset_ms: f64,
    pub uncertainty_ms: f64,
    /// How many exchanges it was chosen from.
    pub exchanges: usize,
}

impl ClockOffset {
    /// Whether `expected_ms` is within the stated uncertainty of the measured offset.
    pub fn agrees_with(&self, expected_ms: f64) -> bool {
        (self.offset_ms - expected_ms).abs() <= self.uncertainty_ms
    }

    /// The offset in ns where it is known to be there (larger than its uncertainty), else
    /// 0: a clock shared with this host measures a few ms off either way, and shifting
    /// by that would only add the measurement's error.
    pub fn known_shift_ns(&self) -> i64 {
        if self.offset_ms.abs() > self.uncertainty_ms {
            (self.offset_ms * 1e6).round() as i64
        } else {
            0
        }
    }
}

/// The offset by the exchange with the shortest round trip; None without a usable one (a
/// round trip that ran backwards means the host's clock was stepped meanwhile).
pub fn estimate(exchanges: &[Exchange]) -> Option<ClockOffset> {
    let usable: Vec<&Exchange> = exchanges
        .iter()
        .filter(|e| e.round_trip_ns() >= 0)
        .collect();
    let best = usable.iter().min_by_key(|e| e.round_trip_ns())?;
    Some(ClockOffset {
        offset_ms: best.offset_ns() as f64 / 1e6,
        uncertainty_ms: best.round_trip_ns() as f64 / 2e6,
        exchanges: usable.len(),
    })
}

/// The remote reading printed by `date +%s%N`: nanoseconds since the epoch, digits only.
pub fn parse_reading(text: &str) -> Option<i128> {
    let t = text.trim();
    if t.is_empty() || t.len() > 24 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_offset_larger_than_its_uncertainty_is_a_shift() {
        let clock = |offset_ms, uncertainty_ms| ClockOffset {
            offset_ms,
            uncertainty_ms,
            exchanges: 8,
        };
        assert_eq!(clock(-2480.5, 40.0).known_shift_ns(), -2_480_500_000);
        assert_eq!(clock(5001.0, 2.0).known_shift_ns(), 5_001_000_000);
        // A shared clock read through a slow exec: noise, not a shift.
        assert_eq!(clock(21.0, 25.0).known_shift_ns(), 0);
        assert_eq!(clock(-3.0, 3.0).known_shift_ns(), 0);
    }

    const S: i128 = 1_000_000_000;
    const MS: i128 = 1_000_000;

    /// An exchange with a remote clock `skew` ahead, whose reading is taken `at` after the
    /// question left, answered `trip` after it left.
    fn exchange(start: i128, skew: i128, at: i128, trip: i128) -> Exchange {
        Exchange {
            sent_ns: start,
            remote_ns: start + at + skew,
            received_ns: start + trip,
        }
    }

    #[test]
    fn a_symmetric_exchange_finds_the_skew_exactly() {
        let e = exchange(1_700_000_000 * S, 5 * S, 10 * MS, 20 * MS);
        let c = estimate(&[e]).unwrap();
        assert_eq!(c.offset_ms, 5000.0);
        assert_eq!(c.uncertainty_ms, 10.0);
    }

    #[test]
    fn the_shortest_round_trip_is_chosen_and_the_skew_is_within_its_uncertainty() {
        let base = 1_700_000_000 * S;
        // Readings taken anywhere in their round trip (a slow exec start, a slow answer).
        let exchanges = [
            exchange(base, 5 * S, 40 * MS, 45 * MS),
            exchange(base + S, 5 * S, MS, 12 * MS),
            exchange(base + 2 * S, 5 * S, 3 * MS, 4 * MS),
            exchange(base + 3 * S, 5 * S, 90 * MS, 100 * MS),
        ];
        let c = estimate(&exchanges).unwrap();
        assert_eq!(c.exchanges, 4);
        assert_eq!(c.uncertainty_ms, 2.0);
        assert_eq!(c.offset_ms, 5001.0);
        assert!(c.agrees_with(5000.0));
        assert!(!c.agrees_with(4990.0));
    }

    #[test]
    fn a_clock_behind_gives_a_negative_offset() {
        let c = estimate(&[exchange(1_000 * S, -250 * MS, 2 * MS, 4 * MS)]).unwrap();
        assert_eq!(c.offset_ms, -250.0);
        assert!(c.agrees_with(-250.0));
    }

    #[test]
    fn exchanges_that_ran_backwards_are_not_used() {
        let backwards = Exchange {
            sent_ns: 10 * S,
            remote_ns: 10 * S,
            received_ns: 9 * S,
        };
        assert_eq!(estimate(&[backwards]), None);
        assert_eq!(estimate(&[]), None);
        let c = estimate(&[backwards, exchange(10 * S, 0, MS, 2 * MS)]).unwrap();
        assert_eq!(c.exchanges, 1);
        assert_eq!(c.offset_ms, 0.0);
    }

    #[test]
    fn readings_are_digits_only() {
        assert_eq!(
            parse_reading("1764165000123456789\n"),
            Some(1764165000123456789)
        );
        for bad in ["", "-5", "12a", "1764165000%N", "9999999999999999999999999"] {
            assert_eq!(parse_reading(bad), None, "{bad}");
        }
    }
}
