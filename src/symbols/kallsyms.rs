//! Kernel function names from `/proc/kallsyms` text, as perf names kernel frames: the
//! text symbol at or below an address (a symbol ends where the next one starts).

/// The kernel's text symbols, sorted by address: (address, where the name is in `text`).
#[derive(Debug, Default)]
pub struct Kallsyms {
    text: String,
    symbols: Vec<(u64, u32, u32)>,
}

impl Kallsyms {
    /// Parses `/proc/kallsyms` (`address type name [module]` lines); None when the addresses
    /// are hidden (all zero under `kptr_restrict`) or nothing is a text symbol.
    pub fn parse(text: impl Into<String>) -> Option<Self> {
        // 200,000 lines or so: split by hand, and keep names as places in the text (taken,
        // not copied: it is megabytes).
        let text = text.into();
        let bytes = text.as_bytes();
        let mut symbols: Vec<(u64, u32, u32)> = Vec::new();
        let mut start = 0usize;
        while start < bytes.len() {
            let end = memchr_newline(&bytes[start..]).map_or(bytes.len(), |i| start + i);
            let line = &bytes[start..end];
            if let Some((address, name_at, name_len)) = text_symbol(line) {
                if address != 0 && u32::try_from(start + name_at).is_ok() {
                    symbols.push((address, (start + name_at) as u32, name_len as u32));
                }
            }
            start = end + 1;
        }
        if symbols.is_empty() {
            return None;
        }
        symbols.sort_by_key(|(a, _, _)| *a);
        symbols.dedup_by_key(|(a, _, _)| *a);
        Some(Kallsyms { text, symbols })
    }

    /// The function containing `address`, when one is at or below it.
    pub fn name_at(&self, address: u64) -> Option<&str> {
        let i = self
            .symbols
            .partition_point(|(a, _, _)| *a <= address)
            .checked_sub(1)?;
        let (_, at, len) = self.symbols[i];
        self.text.get(at as usize..(at + len) as usize)
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

/// (address, name offset, name length) of a text symbol's line.
fn text_symbol(line: &[u8]) -> Option<(u64, usize, usize)> {
    let space = memchr::memchr(b' ', line)?;
    let kind = *line.get(space + 1)?;
    if !matches!(kind, b't' | b'T' | b'w' | b'W') || line.get(space + 2) != Some(&b' ') {
        return None;
    }
    let mut address = 0u64;
    for b in &line[..space] {
        address = address.checked_mul(16)? + (*b as char).to_digit(16)? as u64;
    }
    let name_at = space + 3;
    let name_len = line[name_at..]
        .iter()
        .position(|b| *b == b'\t' || *b == b' ')
        .unwrap_or(line.len() - name_at);
    (name_len > 0).then_some((address, name_at, name_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_symbol_at_or_below_an_address() {
        let k = Kallsyms::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t helper\nffffffff81000200 D data\nffffffff81000300 T last [mod]\n",
        )
        .unwrap();
        assert_eq!(k.name_at(0xffffffff81000050), Some("_stext"));
        assert_eq!(k.name_at(0xffffffff81000250), Some("helper"));
        assert_eq!(k.name_at(0xffffffff81000300), Some("last"));
        assert_eq!(k.name_at(0xffffffff80000000), None);
    }

    #[test]
    fn hidden_addresses_give_no_table() {
        assert!(Kallsyms::parse("0000000000000000 T _stext\n0000000000000000 t x\n").is_none());
    }
}
