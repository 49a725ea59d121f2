//! Log lines (a container writes what it likes) through the marker rules, and markers files
//! (in the store, damaged or edited) through their reader.
#![no_main]
use devprof::profile::markers::{builtin, intervals, rules, Markers};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn matcher() -> &'static rules::Matcher {
    static MATCHER: OnceLock<rules::Matcher> = OnceLock::new();
    MATCHER.get_or_init(|| {
        let mut all = vec![rules::Rule::new("user", "any", r"(?P<number>[\d,]+)").unwrap()];
        for set in builtin::SETS {
            all.extend(builtin::compile(set));
        }
        rules::Matcher::new(all)
    })
}

fuzz_target!(|data: &[u8]| {
    for raw in data.split(|b| *b == b'\n') {
        let (line, _) = rules::clean_line(raw);
        assert!(line.len() <= rules::MAX_LINE);
        if let Some(marker) = matcher().marker(1, &line) {
            assert!(marker.line.len() <= rules::MAX_STORED_LINE);
            let _ = marker.label();
        }
    }
    if let Ok(file) = Markers::read(data) {
        let _ = intervals(&file.markers, None, i64::MIN);
        let _ = file.names();
    }
});
