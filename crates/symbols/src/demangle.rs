//! Demangling frames: Rust (legacy and v0) and C++ (Itanium) symbols, keeping the
//! annotations inferno appends (`_[k]` for kernel frames, ...).

/// Demangles one frame: Rust (legacy and v0) and C++ (Itanium) symbols; the `::h<hash>`
/// suffix that legacy Rust symbols keep is dropped. Anything else is returned as is.
pub fn demangle_frame(frame: &str) -> String {
    let (name, suffix) = split_annotation(frame);
    if let Ok(sym) = rustc_demangle::try_demangle(name) {
        return format!("{sym:#}{suffix}");
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(text) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return format!("{text}{suffix}");
            }
        }
    }
    format!("{}{suffix}", strip_rust_hash(name))
}

/// inferno appends annotations like `_[k]`; keep them outside the symbol.
fn split_annotation(frame: &str) -> (&str, &str) {
    for tag in ["_[k]", "_[j]", "_[i]"] {
        if let Some(name) = frame.strip_suffix(tag) {
            return (name, &frame[name.len()..]);
        }
    }
    (frame, "")
}

/// `demo_node::hash_chain::h0123456789abcdef` -> `demo_node::hash_chain` (perf demangles
/// legacy Rust symbols but keeps the hash).
fn strip_rust_hash(name: &str) -> &str {
    if let Some((head, hash)) = name.rsplit_once("::h") {
        if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) {
            return head;
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_rust_and_cpp_frames() {
        assert_eq!(
            demangle_frame("_ZN9demo_node10hash_chain17h0123456789abcdefE"),
            "demo_node::hash_chain"
        );
        assert_eq!(
            demangle_frame("demo_node::hash_chain::h0123456789abcdef"),
            "demo_node::hash_chain"
        );
        assert_eq!(
            demangle_frame("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            "std::vector<int, std::allocator<int> >::push_back(int const&)"
        );
        assert_eq!(demangle_frame("do_syscall_64_[k]"), "do_syscall_64_[k]");
        assert_eq!(demangle_frame("[unknown]"), "[unknown]");
    }
}
