//! DWARF unwinding: a binary's unwind tables (any bytes, as a container's file may hold),
//! mapped where the input says, and a sample's registers and stack copy unwound through
//! them. The first 48 bytes are the mapping and the registers, the next 2 how much of the
//! rest is the stack; the remainder is the binary.
#![no_main]
use devprof::profile::perfdata::unwind::{DwarfUnwinder, Image, UserState};
use libfuzzer_sys::fuzz_target;
use std::borrow::Cow;

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_at_checked(50) else {
        return;
    };
    let word = |i: usize| u64::from_le_bytes(head[i * 8..i * 8 + 8].try_into().unwrap());
    let (start, len, pgoff, ip, sp, bp) = (word(0), word(1), word(2), word(3), word(4), word(5));
    let stack_len = usize::from(u16::from_le_bytes([head[48], head[49]])).min(rest.len());
    let (stack, binary) = rest.split_at(stack_len);
    let open = |_: &str| Some(Image::Owned(binary.to_vec()));
    let mut unwinder = DwarfUnwinder::new(&open);
    unwinder.map(1, start, len, pgoff, "/bin/app");
    unwinder.fork(1, 2);
    let user = UserState {
        ip,
        sp,
        bp,
        stack: Cow::Borrowed(stack),
    };
    let mut frames = Vec::new();
    unwinder.unwind(1, &user, &mut frames);
    unwinder.unwind(2, &user, &mut frames);
    unwinder.unwind(3, &user, &mut frames);
});
