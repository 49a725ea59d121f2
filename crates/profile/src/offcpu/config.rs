//! Event config files: one perf event per line, `#` starts a comment anywhere on a line,
//! blank lines ignored. The four shipped configs are compiled in, so devprof works from
//! any directory; files in DEVPROF_CONFIG_DIR or ./profiling-configs take precedence.

use std::path::{Path, PathBuf};

/// The shipped configs, by file name.
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "offcpu-events.conf",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../profiling-configs/offcpu-events.conf"
        )),
    ),
    (
        "offcpu-events-contextswitches.conf",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../profiling-configs/offcpu-events-contextswitches.conf"
        )),
    ),
    (
        "offcpu-events-iobandwidth.conf",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../profiling-configs/offcpu-events-iobandwidth.conf"
        )),
    ),
    (
        "offcpu-events-pagefaults.conf",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../profiling-configs/offcpu-events-pagefaults.conf"
        )),
    ),
];

pub const DEFAULT_CONFIG: &str = "offcpu-events.conf";

/// A config as loaded: where it came from and its events in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct EventConfig {
    /// The file name (`offcpu-events-pagefaults.conf`).
    pub name: String,
    /// Where it was read from: a path, or `built-in`.
    pub source: String,
    pub events: Vec<String>,
}

/// The events of a config text, in order, without duplicates.
pub fn parse_events(text: &str) -> Vec<String> {
    let mut events: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        // A line may hold several comma- or space-separated events.
        for event in line
            .split([',', ' ', '\t'])
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            if !events.iter().any(|e| e == event) {
                events.push(event.to_string());
            }
        }
    }
    events
}

/// File names a `--config` value may stand for: as given, with `.conf`, and with the
/// `offcpu-events-` prefix (`pagefaults`, `pagefaults.conf`, `offcpu-events-pagefaults.conf`).
pub fn candidate_names(spec: &str) -> Vec<String> {
    let bare = spec.strip_suffix(".conf").unwrap_or(spec);
    let mut names = vec![format!("{bare}.conf"), spec.to_string()];
    if !bare.starts_with("offcpu-events") {
        names.push(format!("offcpu-events-{bare}.conf"));
    }
    if bare == "default" || bare == "offcpu" {
        names.push(DEFAULT_CONFIG.to_string());
    }
    names.dedup();
    names
}

/// Finds and reads the config `spec` (None: the default). `dirs` are searched in order,
/// then the built-in copies. Errors list what exists.
pub fn load(spec: Option<&str>, dirs: &[PathBuf]) -> Result<EventConfig, String> {
    let spec = spec.unwrap_or(DEFAULT_CONFIG);
    let as_path = Path::new(spec);
    if spec.contains('/') || (as_path.is_file() && !dirs.iter().any(|d| d.join(spec).is_file())) {
        let text = std::fs::read_to_string(as_path)
            .map_err(|e| format!("cannot read config {spec}: {e}"))?;
        return Ok(EventConfig {
            name: as_path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| spec.to_string()),
            source: as_path.display().to_string(),
            events: parse_events(&text),
        });
    }
    let names = candidate_names(spec);
    for dir in dirs {
        for name in &names {
            let path = dir.join(name);
            if path.is_file() {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
                return Ok(EventConfig {
                    name: name.clone(),
                    source: path.display().to_string(),
                    events: parse_events(&text),
                });
            }
        }
    }
    for name in &names {
        if let Some((file, text)) = BUILT_IN.iter().find(|(file, _)| file == name) {
            return Ok(EventConfig {
                name: file.to_string(),
                source: "built-in".into(),
                events: parse_events(text),
            });
        }
    }
    let mut known: Vec<String> = BUILT_IN.iter().map(|(f, _)| f.to_string()).collect();
    for dir in dirs {
        if let Ok(entries) = std::fs::read_dir(dir) {
            known.extend(
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".conf")),
            );
        }
    }
    known.sort();
    known.dedup();
    Err(format!(
        "no event config '{spec}' (looked in {} and the built-in configs); available: {}",
        if dirs.is_empty() {
            "no directory".to_string()
        } else {
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        },
        known.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_anywhere_and_blank_lines_are_ignored() {
        let text = "# header\n\nsched:sched_switch   # trailing\n  major-faults\n#syscalls:sys_enter_read\nmajor-faults\n";
        assert_eq!(
            parse_events(text),
            vec!["sched:sched_switch", "major-faults"]
        );
    }

    #[test]
    fn shipped_configs_hold_exactly_the_issue_events() {
        let events =
            |name: &str| parse_events(BUILT_IN.iter().find(|(f, _)| *f == name).unwrap().1);
        assert_eq!(
            events("offcpu-events.conf"),
            vec![
                "syscalls:sys_enter_futex",
                "syscalls:sys_enter_futex_waitv",
                "syscalls:sys_enter_fsync",
                "syscalls:sys_enter_fdatasync",
                "block:block_rq_issue",
                "block:block_rq_complete"
            ]
        );
        assert_eq!(events("offcpu-events-contextswitches.conf").len(), 7);
        assert_eq!(events("offcpu-events-iobandwidth.conf").len(), 12);
        assert_eq!(
            events("offcpu-events-pagefaults.conf"),
            vec![
                "major-faults",
                "minor-faults",
                "vmscan:mm_vmscan_direct_reclaim_begin",
                "vmscan:mm_vmscan_direct_reclaim_end",
                "vmscan:mm_vmscan_kswapd_wake"
            ]
        );
    }

    #[test]
    fn short_names_file_names_and_paths_all_resolve() {
        for spec in [
            "pagefaults",
            "pagefaults.conf",
            "offcpu-events-pagefaults.conf",
        ] {
            assert_eq!(
                load(Some(spec), &[]).unwrap().name,
                "offcpu-events-pagefaults.conf",
                "{spec}"
            );
        }
        assert_eq!(load(None, &[]).unwrap().name, DEFAULT_CONFIG);
        let dir = tempfile::tempdir().unwrap();
        let custom = dir.path().join("mine.conf");
        std::fs::write(&custom, "sched:sched_switch\n").unwrap();
        let by_path = load(Some(custom.to_str().unwrap()), &[]).unwrap();
        assert_eq!(by_path.events, vec!["sched:sched_switch"]);
        let by_dir = load(Some("mine"), &[dir.path().to_path_buf()]).unwrap();
        assert_eq!(by_dir.source, custom.display().to_string());
    }

    #[test]
    fn a_directory_copy_wins_over_the_built_in_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("offcpu-events-pagefaults.conf"),
            "major-faults\n",
        )
        .unwrap();
        let config = load(Some("pagefaults"), &[dir.path().to_path_buf()]).unwrap();
        assert_eq!(config.events, vec!["major-faults"]);
    }

    #[test]
    fn unknown_config_lists_the_available_ones() {
        let err = load(Some("nope"), &[]).unwrap_err();
        assert!(
            err.contains("no event config 'nope'")
                && err.contains("offcpu-events-iobandwidth.conf"),
            "{err}"
        );
    }
}
