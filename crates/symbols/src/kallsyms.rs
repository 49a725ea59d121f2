//! Kernel function names from `/proc/kallsyms` text, as perf names kernel frames: the
//! text symbol at or below an address (a symbol ends where the next one starts).

/// The kernel's text symbols, sorted by address: (address, where the name is in `text`).
#[derive(Debug, Default)]
pub struct Kallsyms {
    text: Text,
    symbols: Vec<(u64, u32, u32)>,
    /// Where the names are known to hold: everywhere (None) when read live, less for a
    /// copy kept from earlier in the boot (see `kernel_cache`).
    trusted: Option<Trusted>,
    /// Where `_stext` and `_etext` are, when listed.
    core_text: (Option<u64>, Option<u64>),
}

/// The part of a kept copy that still holds: the core kernel's text, and the text of the
/// modules still loaded where they were.
#[derive(Debug)]
struct Trusted {
    core_text: Option<(u64, u64)>,
    modules: Vec<String>,
}

/// The kallsyms text the names are places in: a live read, or a kept copy mapped where it
/// lies (copying its megabytes into fresh memory, then moving them past the copy's header,
/// cost a fold more than parsing them).
enum Text {
    Owned(String),
    Mapped { file: memmap2::Mmap, start: usize },
}

impl Default for Text {
    fn default() -> Self {
        Text::Owned(String::new())
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Text({} bytes)", self.bytes().len())
    }
}

impl Text {
    fn bytes(&self) -> &[u8] {
        match self {
            Text::Owned(text) => text.as_bytes(),
            Text::Mapped { file, start } => file.get(*start..).unwrap_or_default(),
        }
    }

    fn get(&self, range: std::ops::Range<usize>) -> Option<&str> {
        std::str::from_utf8(self.bytes().get(range)?).ok()
    }
}

impl Kallsyms {
    /// Parses `/proc/kallsyms` (`address type name [module]` lines); None when the addresses
    /// are hidden (all zero under `kptr_restrict`) or nothing is a text symbol.
    pub fn parse(text: impl Into<String>) -> Option<Self> {
        Self::index(Text::Owned(text.into()))
    }

    /// Parses the kallsyms text that a mapped file holds from byte `start` on.
    pub fn parse_mapped(file: memmap2::Mmap, start: usize) -> Option<Self> {
        Self::index(Text::Mapped { file, start })
    }

    fn index(text: Text) -> Option<Self> {
        // 200,000 lines or so: split by hand, and keep names as places in the text (taken,
        // not copied: it is megabytes).
        let bytes = text.bytes();
        // About 45 bytes a line: reserved once, not grown through a dozen copies.
        let mut symbols: Vec<(u64, u32, u32)> = Vec::with_capacity(bytes.len() / 40);
        // Found before duplicates go: `_stext` shares its address with `_text`.
        let mut core_text = (None, None);
        let mut start = 0usize;
        while start < bytes.len() {
            let end = memchr_newline(&bytes[start..]).map_or(bytes.len(), |i| start + i);
            let line = &bytes[start..end];
            if let Some((address, name_at, name_len)) = text_symbol(line) {
                if address != 0 && u32::try_from(start + name_at).is_ok() {
                    symbols.push((address, (start + name_at) as u32, name_len as u32));
                    // The core kernel's own (a module's symbol has `[module]` after it).
                    let core = name_at + name_len == line.len();
                    match &line[name_at..name_at + name_len] {
                        b"_stext" if core => core_text.0 = Some(address),
                        b"_etext" if core => core_text.1 = Some(address),
                        _ => {}
                    }
                }
            }
            start = end + 1;
        }
        if symbols.is_empty() {
            return None;
        }
        // Among aliases at one address perf names it by the last one listed: it gives each
        // symbol the extent up to the next one's start, so only the last alias has a size,
        // and a sized symbol wins (`__x64_sys_getppid` over `__do_sys_getppid`). A stable
        // sort keeps the list's order within an address; the reversal keeps its last.
        symbols.sort_by_key(|(a, _, _)| *a);
        symbols.reverse();
        symbols.dedup_by_key(|(a, _, _)| *a);
        symbols.reverse();
        Some(Kallsyms {
            text,
            symbols,
            trusted: None,
            core_text,
        })
    }

    /// The text the table was parsed from (empty were it no UTF-8: it is read as ASCII).
    pub fn text(&self) -> &str {
        std::str::from_utf8(self.text.bytes()).unwrap_or_default()
    }

    /// The core kernel's text, `_stext` to `_etext`: where KASLR put it at boot, so it does
    /// not move until the next one.
    pub fn core_text(&self) -> Option<(u64, u64)> {
        match self.core_text {
            (Some(start), Some(end)) if start < end => Some((start, end)),
            _ => None,
        }
    }

    /// The same names, trusted only in the core kernel's text and between the first and
    /// the last listed symbol of each of `modules` (past a module's last function, memory
    /// may since have gone to a BPF program or a trampoline).
    pub fn trusted_for(mut self, modules: Vec<String>) -> Self {
        let core_text = self.core_text();
        self.trusted = Some(Trusted { core_text, modules });
        self
    }

    /// Whether the name found for `address` can be trusted.
    pub fn covers(&self, address: u64) -> bool {
        let Some(trusted) = &self.trusted else {
            return true;
        };
        if trusted
            .core_text
            .is_some_and(|(start, end)| (start..end).contains(&address))
        {
            return true;
        }
        let i = self.symbols.partition_point(|(a, _, _)| *a <= address);
        let (Some(below), Some(above)) = (i.checked_sub(1), self.symbols.get(i)) else {
            return false;
        };
        let module = self.module_of(below);
        module.is_some_and(|m| trusted.modules.iter().any(|t| t == m))
            && self.module_of_entry(above) == module
    }

    /// The `[module]` after a symbol's name, without brackets.
    fn module_of(&self, index: usize) -> Option<&str> {
        self.module_of_entry(&self.symbols[index])
    }

    fn module_of_entry(&self, &(_, at, len): &(u64, u32, u32)) -> Option<&str> {
        let start = (at + len) as usize;
        let rest = self.text.bytes().get(start..)?;
        let end = start + memchr_newline(rest).unwrap_or(rest.len());
        let line = self.text.get(start..end)?.trim();
        line.strip_prefix('[')?.strip_suffix(']')
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
    // A 64-bit kernel's addresses are 16 digits: the type is looked at where it then
    // stands, and a line that is no text symbol is left after that one look.
    let space = if line.get(16) == Some(&b' ') {
        16
    } else {
        memchr::memchr(b' ', line)?
    };
    let kind = *line.get(space + 1)?;
    if !matches!(kind, b't' | b'T' | b'w' | b'W') || line.get(space + 2) != Some(&b' ') {
        return None;
    }
    if space > 16 {
        return None;
    }
    let mut address = 0u64;
    for b in &line[..space] {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        address = address << 4 | u64::from(digit);
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
    fn a_live_table_covers_everything_a_kept_one_the_core_and_its_modules() {
        // `_text` first and at the same address, as this VM lists them.
        let text = "ffffffff81000000 T _text\nffffffff81000000 T _stext\nffffffff81000100 t helper\nffffffff81000200 T _etext\nffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]\nffffffffc0400000 t ovl_open\t[overlay]\nffffffffc0400100 t ovl_read\t[overlay]\nffffffffc0500000 t nf_hook\t[nf_tables]\nffffffffc0500100 t nf_last\t[nf_tables]\n";
        let live = Kallsyms::parse(text).unwrap();
        assert!(live.covers(0xffffffffc0201010));
        assert_eq!(
            live.core_text(),
            Some((0xffffffff81000000, 0xffffffff81000200))
        );
        let kept = live.trusted_for(vec!["overlay".into(), "nf_tables".into()]);
        assert!(kept.covers(0xffffffff81000150));
        assert!(!kept.covers(0xffffffff81000200));
        assert!(
            !kept.covers(0xffffffffc0201010),
            "ftrace trampolines come and go"
        );
        assert!(kept.covers(0xffffffffc0400010));
        assert!(
            !kept.covers(0xffffffffc0400110),
            "past overlay's last symbol: anything's"
        );
        assert!(kept.covers(0xffffffffc0500010));
        assert!(!kept.covers(0xffffffffc0500110), "the last symbol of all");
        assert_eq!(kept.name_at(0xffffffff81000150), Some("helper"));
        let odd = Kallsyms::parse(format!("{text}ffffffffc0600000 t _etext\t[odd]\n")).unwrap();
        assert_eq!(
            odd.core_text(),
            Some((0xffffffff81000000, 0xffffffff81000200))
        );
        let without = Kallsyms::parse(text)
            .unwrap()
            .trusted_for(vec!["nf_tables".into()]);
        assert!(!without.covers(0xffffffffc0400010), "overlay was reloaded");
    }

    /// The native fold named a getppid frame `__do_sys_getppid` where perf script names it
    /// `__x64_sys_getppid`: lines as this VM's /proc/kallsyms lists them.
    #[test]
    fn aliases_at_one_address_are_named_by_the_last_listed_as_perf_names_them() {
        let k = Kallsyms::parse(
            "ffffffff81377c50 t __pfx___do_sys_getppid\nffffffff81377c50 T __pfx___ia32_sys_getppid\n\
             ffffffff81377c50 T __pfx___x64_sys_getppid\nffffffff81377c60 t __do_sys_getppid\n\
             ffffffff81377c60 T __ia32_sys_getppid\nffffffff81377c60 T __x64_sys_getppid\n\
             ffffffff81377ca0 T __x64_sys_getpgid\n",
        )
        .unwrap();
        assert_eq!(k.name_at(0xffffffff81377c70), Some("__x64_sys_getppid"));
        assert_eq!(
            k.name_at(0xffffffff81377c55),
            Some("__pfx___x64_sys_getppid")
        );
        assert_eq!(k.name_at(0xffffffff81377ca0), Some("__x64_sys_getpgid"));
    }

    #[test]
    fn hidden_addresses_give_no_table() {
        assert!(Kallsyms::parse("0000000000000000 T _stext\n0000000000000000 t x\n").is_none());
    }
}
