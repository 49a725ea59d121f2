//! A runtime's perf map (`/tmp/perf-<pid>.map`): one line per piece of JIT-compiled code,
//! `START SIZE NAME` (hexadecimal, with or without `0x`), as JVMs and V8 write it for
//! perf. The file comes from the profiled process, so it is data: lines that do not parse
//! are skipped and the caller bounds its size.

/// Largest perf map read or copied; a bigger one is refused, not cut (a cut map names
/// wrong).
pub const PERF_MAP_LIMIT: u64 = 256 << 20;

/// The names of a process's JIT code by address.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PerfMap {
    /// (start, end, name), sorted by start; for one start, the last line written wins
    /// (a runtime that moves or recompiles code writes the new entry after the old).
    entries: Vec<(u64, u64, String)>,
}

fn hex(field: &str) -> Option<u64> {
    let digits = field
        .strip_prefix("0x")
        .or_else(|| field.strip_prefix("0X"))
        .unwrap_or(field);
    u64::from_str_radix(digits, 16).ok()
}

impl PerfMap {
    pub fn parse(text: &str) -> Self {
        let entries: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.splitn(3, ' ');
                let start = hex(fields.next()?)?;
                let size = hex(fields.next()?)?;
                let name = fields.next()?.trim_end();
                let end = start.checked_add(size).filter(|_| size > 0)?;
                (!name.is_empty()).then(|| (start, end, name.to_string()))
            })
            .collect();
        Self::from_entries(entries)
    }

    /// A map of `(start, end, name)` entries in the order the runtime wrote them (a
    /// jitdump's code loads, or a perf map's lines followed by a jitdump's).
    pub fn from_entries(mut entries: Vec<(u64, u64, String)>) -> Self {
        // Stable: of the lines with one start, the last stays last and is kept.
        entries.sort_by_key(|e| e.0);
        let mut kept: Vec<(u64, u64, String)> = Vec::with_capacity(entries.len());
        for entry in entries {
            match kept.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => kept.push(entry),
            }
        }
        PerfMap { entries: kept }
    }

    /// Reads the map at `path`, refusing one over `limit` bytes rather than cutting it (a
    /// cut map names wrong) and anything that is not a regular file.
    pub fn read(path: &std::path::Path, limit: u64) -> std::io::Result<Self> {
        use std::io::Read;
        let meta = std::fs::symlink_metadata(path)?;
        if !meta.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let mut text = String::new();
        std::fs::File::open(path)?
            .take(limit + 1)
            .read_to_string(&mut text)?;
        if text.len() as u64 > limit {
            return Err(std::io::Error::other(format!(
                "over the limit of {limit} bytes"
            )));
        }
        Ok(Self::parse(&text))
    }

    /// The name of the code at `address`.
    pub fn name_at(&self, address: u64) -> Option<&str> {
        let at = self.entries.partition_point(|e| e.0 <= address);
        let (_, end, name) = self.entries.get(at.checked_sub(1)?)?;
        (address < *end).then_some(name.as_str())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The map as a perf map's text (`START SIZE NAME`, hexadecimal), which `parse` reads
    /// back: kept beside a capture, it names the JIT code again.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for (start, end, name) in &self.entries {
            text.push_str(&format!("{start:x} {:x} {name}\n", end - start));
        }
        text
    }

    /// This map's entries followed by `later`'s, which win where both name one start.
    pub fn then(self, later: PerfMap) -> PerfMap {
        let mut entries = self.entries;
        entries.extend(later.entries);
        Self::from_entries(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_addresses_inside_entries_only() {
        let map = PerfMap::parse(
            "7f0000001000 40 LazyCompile:~fib /app/x.js:3\n\
             0x7f0000002000 0x10 Interpreter\n\
             garbage line\n\
             7f0000001000 20 LazyCompile:*fib /app/x.js:3\n",
        );
        assert_eq!(map.len(), 2);
        assert_eq!(
            map.name_at(0x7f000000101f),
            Some("LazyCompile:*fib /app/x.js:3")
        );
        assert_eq!(
            map.name_at(0x7f0000001020),
            None,
            "the later, shorter entry wins"
        );
        assert_eq!(map.name_at(0x7f0000002008), Some("Interpreter"));
        assert_eq!(map.name_at(0x7f0000000fff), None);
        assert_eq!(map.name_at(0x7f0000002010), None);
    }

    #[test]
    fn a_map_over_the_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf-1.map");
        std::fs::write(&path, "1000 10 f\n").unwrap();
        assert_eq!(PerfMap::read(&path, 100).unwrap().len(), 1);
        assert!(PerfMap::read(&path, 4).is_err());
    }
}
