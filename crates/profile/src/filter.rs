//! Which stacks and frames a rendering or a ranking looks at: `--include`/`--exclude`
//! (whole stacks, like `grep`/`grep -v` on folded lines) and presets that drop the frames a
//! runtime's users routinely filter out.

use crate::folded::Folded;
use regex::Regex;
use std::collections::HashMap;

/// Frame presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// Node.js: drops libc/libuv/V8/node internals and stub frames, and strips the
    /// `LazyCompile:*` / `LazyCompile:~` prefixes V8 puts on JavaScript functions.
    Node,
}

/// The frames the Node preset drops: the patterns Node users `grep -v` out of `perf
/// script` text. Each begins with a space, so a frame is dropped when the pattern occurs
/// in it with the frame's start (or a space inside it) before the pattern, exactly as
/// those greps match a `perf script` line.
pub const NODE_DROPPED: &[&str] = &[
    " __libc_start",
    " uv_",
    " LazyCompile ",
    " v8::internal::",
    " node::",
    " Builtins_",
    " Builtin:",
    " Stub:",
    " LoadIC:",
    " [unknown]",
    " LoadPolymorphicIC:",
];

/// The prefixes the Node preset strips from frame names.
pub const NODE_STRIPPED_PREFIXES: &[&str] = &["LazyCompile:*", "LazyCompile:~"];

impl Preset {
    /// The frame as the preset shows it, or `None` when the preset drops it.
    pub fn frame(self, frame: &str) -> Option<&str> {
        match self {
            Preset::Node => {
                let spaced = format!(" {frame}");
                if NODE_DROPPED.iter().any(|p| spaced.contains(p)) {
                    return None;
                }
                Some(
                    NODE_STRIPPED_PREFIXES
                        .iter()
                        .find_map(|p| frame.strip_prefix(p))
                        .unwrap_or(frame),
                )
            }
        }
    }
}

/// What to keep of a profile. The preset applies first; `include`/`exclude` then match
/// the stack text (frames joined by `;`) as the preset left it.
#[derive(Debug, Clone, Default)]
pub struct StackFilter {
    /// Keep only stacks in which this matches.
    pub include: Option<Regex>,
    /// Drop stacks in which this matches.
    pub exclude: Option<Regex>,
    pub preset: Option<Preset>,
}

impl StackFilter {
    pub fn is_noop(&self) -> bool {
        self.include.is_none() && self.exclude.is_none() && self.preset.is_none()
    }

    /// The filters in words, for subtitles.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.preset.is_some() {
            parts.push("preset node".to_string());
        }
        if let Some(re) = &self.include {
            parts.push(format!("include /{re}/"));
        }
        if let Some(re) = &self.exclude {
            parts.push(format!("exclude /{re}/"));
        }
        parts.join(", ")
    }

    /// The filtered profile; stacks that become identical are merged, stacks left with no
    /// frame are dropped.
    pub fn apply(&self, folded: &Folded) -> Folded {
        if self.is_noop() {
            return folded.clone();
        }
        let mut merged: HashMap<String, u64> = HashMap::new();
        for (stack, count) in &folded.stacks {
            let stack = match self.preset {
                Some(preset) => {
                    let kept: Vec<&str> =
                        stack.split(';').filter_map(|f| preset.frame(f)).collect();
                    if kept.is_empty() {
                        continue;
                    }
                    kept.join(";")
                }
                None => stack.clone(),
            };
            if self.include.as_ref().is_some_and(|re| !re.is_match(&stack)) {
                continue;
            }
            if self.exclude.as_ref().is_some_and(|re| re.is_match(&stack)) {
                continue;
            }
            *merged.entry(stack).or_default() += count;
        }
        let mut stacks: Vec<(String, u64)> = merged.into_iter().collect();
        stacks.sort();
        Folded { stacks }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(text: &str) -> Folded {
        Folded::from_folded_text(text)
    }

    #[test]
    fn node_preset_drops_runtime_frames_and_strips_lazycompile_prefixes() {
        let input = folded(
            "node;__libc_start_main;node::Start;uv_run;LazyCompile:*handler /app/server.js:10;Builtins_InterpreterEntryTrampoline;LazyCompile:~parse /app/json.js:3 5\n\
             node;__libc_start_main;node::Start;uv_run;LazyCompile:*handler /app/server.js:10;LazyCompile:~parse /app/json.js:3 2\n\
             node;[unknown];v8::internal::Heap::CollectGarbage;Stub:CEntry;LoadIC:x;LoadPolymorphicIC:y;Builtin:z 4\n\
             node;void node::Foo();std::__libc_start_thing;main 1\n",
        );
        let filter = StackFilter {
            preset: Some(Preset::Node),
            ..Default::default()
        };
        let out = filter.apply(&input);
        assert_eq!(
            out.stacks,
            vec![
                ("node".to_string(), 4),
                (
                    "node;handler /app/server.js:10;parse /app/json.js:3".to_string(),
                    7
                ),
                // " node::" occurs after the space in "void node::Foo()"; a frame that
                // merely contains "__libc_start" without a space before it is kept.
                ("node;std::__libc_start_thing;main".to_string(), 1),
            ]
        );
        assert_eq!(out.total(), input.total());
    }

    #[test]
    fn node_preset_keeps_lazycompile_frames_it_only_strips() {
        assert_eq!(
            Preset::Node.frame("LazyCompile:*a b.js:1"),
            Some("a b.js:1")
        );
        assert_eq!(Preset::Node.frame("LazyCompile:~a"), Some("a"));
        assert_eq!(Preset::Node.frame("LazyCompile a"), None);
        assert_eq!(Preset::Node.frame("[unknown]"), None);
        assert_eq!(Preset::Node.frame("hash_chain"), Some("hash_chain"));
    }

    #[test]
    fn include_and_exclude_match_whole_stacks_like_grep() {
        let input = folded("t;a;b 3\nt;a;c 2\nt;d 1\n");
        let only_a = StackFilter {
            include: Some(Regex::new(";a;").unwrap()),
            ..Default::default()
        };
        assert_eq!(only_a.apply(&input).total(), 5);
        let not_c = StackFilter {
            include: Some(Regex::new(";a;").unwrap()),
            exclude: Some(Regex::new(";c$").unwrap()),
            ..Default::default()
        };
        assert_eq!(not_c.apply(&input).stacks, vec![("t;a;b".to_string(), 3)]);
        assert_eq!(StackFilter::default().apply(&input), input);
    }
}
