//! py-spy's raw output (`--format raw`: folded stacks, root first, with `--threads` a
//! `thread (TID): NAME` root) into devprof's folded stacks, whose root is the thread name.
//! Python frames are `function (file.py:line)`; with `--native`, native frames are
//! `symbol (library)` or `0xADDRESS (library)`.

use super::folded::Folded;

/// Folds py-spy's raw text. Lines that are not `stack count` are skipped.
pub fn fold_pyspy_raw(text: &str) -> Folded {
    let mut lines = String::with_capacity(text.len());
    for line in text.lines() {
        let Some((stack, count)) = line.trim_end().rsplit_once(' ') else {
            continue;
        };
        if count.parse::<u64>().is_err() || stack.is_empty() {
            continue;
        }
        let (root, rest) = stack.split_once(';').unwrap_or((stack, ""));
        let root = thread_root(root);
        lines.push_str(&root);
        if !rest.is_empty() {
            lines.push(';');
            lines.push_str(rest);
        }
        lines.push(' ');
        lines.push_str(count);
        lines.push('\n');
    }
    Folded::from_folded_text(&lines)
}

/// `thread (7): hash` → `hash`; `thread (7)` stays; a stack without a thread root (py-spy
/// run without `--threads`) gets `python` before its first frame.
fn thread_root(first: &str) -> String {
    match first.strip_prefix("thread (") {
        Some(rest) => match rest.split_once("): ") {
            Some((_, name)) if !name.is_empty() => name.to_string(),
            _ => first.to_string(),
        },
        None => format!("python;{first}"),
    }
}

/// A Python frame as py-spy prints it: `function (file.py:line)`.
pub fn is_python_frame(frame: &str) -> bool {
    frame
        .strip_suffix(')')
        .and_then(|f| f.rsplit_once(" ("))
        .is_some_and(|(name, place)| {
            !name.is_empty()
                && place.rsplit_once(':').is_some_and(|(file, line)| {
                    file.ends_with(".py") && line.chars().all(|c| c.is_ascii_digit())
                })
        })
}

/// The share (0..=1) of samples whose stack carries at least one Python frame.
pub fn python_named_share(folded: &Folded) -> f64 {
    let named: u64 = folded
        .stacks
        .iter()
        .filter(|(s, _)| super::function_frames(s).any(is_python_frame))
        .map(|(_, c)| c)
        .sum();
    super::percent(named, folded.total()) / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_roots_become_thread_names() {
        let f = fold_pyspy_raw(
            "thread (7): hash;Thread.run (threading.py:964);hash_loop (busy.py:55) 4\n\
             thread (8);f (a.py:1) 2\nf (a.py:1) 1\nnot a line\n",
        );
        assert_eq!(
            f.stacks,
            vec![
                (
                    "hash;Thread.run (threading.py:964);hash_loop (busy.py:55)".to_string(),
                    4
                ),
                ("python;f (a.py:1)".to_string(), 1),
                ("thread (8);f (a.py:1)".to_string(), 2),
            ]
        );
    }

    #[test]
    fn python_frames_are_function_file_line() {
        assert!(is_python_frame("hash_loop (busy.py:55)"));
        assert!(is_python_frame(
            "sort_chunk.<locals>.<listcomp> (busy.py:76)"
        ));
        assert!(!is_python_frame("deflate (libz.so.1.2.13)"));
        assert!(!is_python_frame("0x7fa77e9a227c (libz.so.1.2.13)"));
        assert!(!is_python_frame("hash"));
    }
}
