//! Kernel function names from `/proc/kallsyms` text, as perf names kernel frames: the
//! text symbol at or below an address (a symbol ends where the next one starts).

/// The kernel's text symbols, sorted by address.
#[derive(Debug, Default)]
pub struct Kallsyms {
    symbols: Vec<(u64, String)>,
}

impl Kallsyms {
    /// Parses `/proc/kallsyms` (`address type name [module]` lines); None when the addresses
    /// are hidden (all zero under `kptr_restrict`) or nothing is a text symbol.
    pub fn parse(text: &str) -> Option<Self> {
        let mut symbols: Vec<(u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut parts = line.split_whitespace();
                let address = u64::from_str_radix(parts.next()?, 16).ok()?;
                let kind = parts.next()?;
                let name = parts.next()?;
                (address != 0 && matches!(kind, "t" | "T" | "w" | "W"))
                    .then(|| (address, name.to_string()))
            })
            .collect();
        if symbols.is_empty() {
            return None;
        }
        symbols.sort_by_key(|(a, _)| *a);
        symbols.dedup_by_key(|(a, _)| *a);
        Some(Kallsyms { symbols })
    }

    /// The function containing `address`, when one is at or below it.
    pub fn name_at(&self, address: u64) -> Option<&str> {
        let i = self
            .symbols
            .partition_point(|(a, _)| *a <= address)
            .checked_sub(1)?;
        Some(&self.symbols[i].1)
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }
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
