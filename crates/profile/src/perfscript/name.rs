//! Names for the frames of a stack line, as a flamegraph shows them: the symbol without its
//! `+0x` offset and without an argument list, Rust and C++ names demangled, a frame perf
//! could not name shown as its module (`[libc.so.6]`), and inlined frames (`a->b`) split,
//! the inner ones marked `_[i]`. The rules are inferno's (and FlameGraph's), so devprof's
//! folded stacks line up with what those tools make of the same `perf script`.

use super::parse::StackLine;
use devprof_symbols::demangle::demangle_frame;

/// Names the frames of `line`, outermost first (an inlined chain is `caller->callee`), into
/// `out`. `java` applies the JVM's tidying (Java class names lose their leading `L`).
/// Nothing is added for a frame that is a process name in parentheses.
pub fn frame_names(line: &StackLine<'_>, java: bool, out: &mut Vec<String>) {
    let mut symbol = line.symbol;
    if let Some(offset) = symbol.rfind("+0x") {
        if symbol[offset + 3..].chars().all(|c| c.is_ascii_hexdigit()) {
            symbol = &symbol[..offset];
        }
    }
    if symbol.starts_with('(') {
        return;
    }
    let symbol = fix_partially_demangled_rust(symbol);
    for (i, function) in symbol.split("->").enumerate() {
        let mut name = tidy_generic(&with_module_fallback(line.module, function));
        if java {
            name = tidy_java(name);
        }
        let mut name = demangle_frame(&name);
        if i > 0 && !name.contains("_[i]") {
            name.push_str("_[i]");
        }
        out.push(name);
    }
}

/// `[unknown]` becomes the module's file name in brackets (`[libc.so.6]`), unless the
/// module is unknown too.
fn with_module_fallback(module: &str, function: &str) -> String {
    if function != "[unknown]" || module == "[unknown]" {
        return function.to_string();
    }
    let file = &module[module.rfind('/').map(|i| i + 1).unwrap_or(0)..];
    format!("[{file}]")
}

/// Drops an argument list (`f(int)` -> `f`) but keeps Go method names
/// (`net/http.(*Client).Do`), C++ `(anonymous namespace)` and a trailing source place
/// (`main.mix (main.go:9)`, devprof's Go frames); `;` (the folded format's separator)
/// becomes `:`.
fn tidy_generic(function: &str) -> String {
    let (function, place) = split_place(function);
    format!("{}{}", tidy_name(function), place.replace(';', ":"))
}

/// `name (file:line)` -> (`name`, ` (file:line)`); (the whole, ``) without such a place.
fn split_place(function: &str) -> (&str, &str) {
    let place = function.rfind(" (").filter(|&open| {
        let inner = function[open + 2..].strip_suffix(')').unwrap_or("");
        inner.rsplit_once(':').is_some_and(|(file, line)| {
            !file.is_empty()
                && !file.contains(['(', ')', ' '])
                && !line.is_empty()
                && line.bytes().all(|b| b.is_ascii_digit())
        })
    });
    match place {
        Some(open) => function.split_at(open),
        None => (function, ""),
    }
}

fn tidy_name(function: &str) -> String {
    let function = function.replace(';', ":");
    let mut depth: i32 = 0;
    let mut last_dot = None;
    let mut end = function.len();
    for (idx, c) in function.char_indices() {
        match c {
            '<' | '{' | '[' => depth += 1,
            '>' | '}' | ']' | ')' => depth -= 1,
            '(' => {
                if depth == 0 {
                    let go_method = last_dot == Some(idx);
                    let anonymous = function[idx..].starts_with("(anonymous namespace)");
                    if !go_method && !anonymous {
                        end = idx;
                        break;
                    }
                }
                depth += 1;
            }
            '.' => last_dot = Some(idx + 1),
            _ => {}
        }
    }
    function[..end].to_string()
}

/// `Lorg/example/Foo;.bar` -> `org/example/Foo;.bar`.
fn tidy_java(mut function: String) -> String {
    if function.starts_with('L') && function.contains('/') {
        function.remove(0);
    }
    function
}

/// Legacy Rust symbols that a profiler demangled only halfway
/// (`_$LT$std..fs..File$u20$as$u20$std..io..Read$GT$::read::h5d84059cf335c8e6`) finished;
/// anything else is returned as it is.
fn fix_partially_demangled_rust(symbol: &str) -> std::borrow::Cow<'_, str> {
    const HASH_LEN: usize = 17; // `h` + 16 hex digits
    let is_hash = |s: &str| s.starts_with('h') && s[1..].chars().all(|c| c.is_ascii_hexdigit());
    if symbol.len() < HASH_LEN
        || !symbol.is_char_boundary(symbol.len() - HASH_LEN)
        || !is_hash(&symbol[symbol.len() - HASH_LEN..])
    {
        return std::borrow::Cow::Borrowed(symbol);
    }
    let mut rest = &symbol[..symbol.len() - HASH_LEN];
    rest = rest.strip_suffix("::").unwrap_or(rest);
    if rest.starts_with("_$") {
        rest = &rest[1..];
    }
    const ESCAPES: &[(&str, &str)] = &[
        ("$SP$", "@"),
        ("$BP$", "*"),
        ("$RF$", "&"),
        ("$LT$", "<"),
        ("$GT$", ">"),
        ("$LP$", "("),
        ("$RP$", ")"),
        ("$C$", ","),
        ("$u7e$", "~"),
        ("$u20$", " "),
        ("$u27$", "'"),
        ("$u3d$", "="),
        ("$u5b$", "["),
        ("$u5d$", "]"),
        ("$u7b$", "{"),
        ("$u7d$", "}"),
        ("$u3b$", ";"),
        ("$u2b$", "+"),
        ("$u21$", "!"),
        ("$u22$", "\""),
    ];
    let mut out = String::with_capacity(rest.len());
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("..") {
            out.push_str("::");
            rest = after;
        } else if let Some(after) = rest.strip_prefix('.') {
            out.push('.');
            rest = after;
        } else if rest.starts_with('$') {
            match ESCAPES.iter().find(|(pat, _)| rest.starts_with(pat)) {
                Some((pat, text)) => {
                    out.push_str(text);
                    rest = &rest[pat.len()..];
                }
                None => {
                    out.push_str(rest);
                    break;
                }
            }
        } else {
            let end = rest.find(['$', '.']).unwrap_or(rest.len());
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(symbol: &str, module: &str) -> Vec<String> {
        let mut out = Vec::new();
        frame_names(
            &StackLine {
                pc: "1",
                symbol,
                module,
            },
            false,
            &mut out,
        );
        out
    }

    #[test]
    fn names_frames_as_flamegraphs_show_them() {
        assert_eq!(
            names("[unknown]", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
            ["[libc.so.6]"]
        );
        assert_eq!(names("[unknown]", "[unknown]"), ["[unknown]"]);
        assert_eq!(
            names("_dl_check_map_versions+0x597", "/usr/lib/ld-2.28.so"),
            ["_dl_check_map_versions"]
        );
        assert_eq!(names("foo(int, char)", "/a"), ["foo"]);
        assert_eq!(
            names("net/http.(*Client).Do", "/a"),
            ["net/http.(*Client).Do"]
        );
        assert_eq!(
            names("ns::(anonymous namespace)::f(int)", "/a"),
            ["ns::(anonymous namespace)::f"]
        );
        assert_eq!(names("a->b->c", "/a"), ["a", "b_[i]", "c_[i]"]);
        // devprof's Go frames keep their place; only a real `file:line` is one.
        assert_eq!(
            names("main.spin (main.go:16)->main.(*T).mix (main.go:9)", "/a"),
            ["main.spin (main.go:16)", "main.(*T).mix (main.go:9)_[i]"]
        );
        assert_eq!(names("f(int) (x.cc:3)", "/a"), ["f (x.cc:3)"]);
        assert_eq!(names("f (a b:1)", "/a"), ["f "]);
        assert_eq!(names("f (a.go:1x)", "/a"), ["f "]);
        assert_eq!(names("g (a.go:)", "/a"), ["g "]);
        assert!(names("(deleted)", "/a").is_empty());
        assert_eq!(
            names("_ZN9demo_node10hash_chain17h0123456789abcdefE", "/a"),
            ["demo_node::hash_chain"]
        );
        assert_eq!(
            names("_$LT$std..fs..ReadDir$u20$as$u20$core..iter..traits..iterator..Iterator$GT$::next::hc14f1750ca79129b", "/a"),
            ["<std::fs::ReadDir as core::iter::traits::iterator::Iterator>::next"]
        );
    }

    #[test]
    fn java_frames_lose_the_class_descriptor_prefix() {
        let mut out = Vec::new();
        frame_names(
            &StackLine {
                pc: "1",
                symbol: "Lorg/example/Foo;.bar(I)V",
                module: "/tmp/perf-1.map",
            },
            true,
            &mut out,
        );
        assert_eq!(out, ["org/example/Foo:.bar"]);
    }
}
