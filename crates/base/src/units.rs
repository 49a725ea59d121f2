//! Units, parsed once and printed the same way everywhere: byte sizes, grouped counts,
//! and durations (DURATION arguments `60`, `45s`, `2m`, `1m30s`; AGE arguments `7d`, `12h`).

use std::time::Duration;

/// `512 B`, `12.3 KiB`, `110.5 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Parses `60`, `45s`, `2m`, `1m30s`, `1h5m`, `7d`. A bare number means seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    let mut last_rank = usize::MAX;
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            number.push(ch);
            continue;
        }
        let (rank, unit) = match ch {
            'd' => (0, 86_400),
            'h' => (1, 3_600),
            'm' => (2, 60),
            's' => (3, 1),
            _ => {
                return Err(format!(
                    "'{text}': unknown unit '{ch}' (use s, m, h or d, e.g. 90s, 1m30s)"
                ))
            }
        };
        if number.is_empty() {
            return Err(format!("'{text}': unit '{ch}' has no number before it"));
        }
        if last_rank != usize::MAX && rank <= last_rank {
            return Err(format!(
                "'{text}': units must go from largest to smallest, each once"
            ));
        }
        last_rank = rank;
        let value: u64 = number
            .parse()
            .map_err(|_| format!("'{text}': number too large"))?;
        total = value
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("'{text}': duration too large"))?;
        number.clear();
    }
    if !number.is_empty() {
        return Err(format!(
            "'{text}': trailing number without a unit (e.g. 1m30s)"
        ));
    }
    Ok(Duration::from_secs(total))
}

/// Human form for summaries and titles: `5 s`, `1 m 30 s`, `2.4 s` for fractional.
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        if (secs - secs.round()).abs() < 0.05 {
            format!("{} s", secs.round() as u64)
        } else {
            format!("{secs:.1} s")
        }
    } else {
        let whole = d.as_secs();
        let (m, s) = (whole / 60, whole % 60);
        if s == 0 {
            format!("{m} min")
        } else {
            format!("{m} min {s} s")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(4958), "4,958");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(692224), "676.0 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(parse_duration("60").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("45s").unwrap(), Duration::from_secs(45));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(parse_duration("1h5m").unwrap(), Duration::from_secs(3_900));
    }

    #[test]
    fn rejects_malformed_durations() {
        for bad in ["", "s", "5x", "1m5", "30s1m", "1m1m", "-5"] {
            assert!(parse_duration(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn human_form() {
        assert_eq!(human_duration(Duration::from_secs(5)), "5 s");
        assert_eq!(human_duration(Duration::from_millis(2_400)), "2.4 s");
        assert_eq!(human_duration(Duration::from_secs(90)), "1 min 30 s");
    }
}
