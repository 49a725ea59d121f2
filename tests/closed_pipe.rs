//! Every store command piped into a reader that stops after one line (`| head -1`) ends
//! quietly with exit 0: no panic, no error. The store is large enough that each command's
//! output outgrows the pipe's buffer (64 KiB), so the write after the reader left fails.

mod common;

use chrono::{Duration as Secs, Local};
use common::*;
use devprof::store::{FileRecord, Manifest, Stem};
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

const CAPTURES: usize = 1500;
const FUNCTIONS: usize = 4000;

/// Folded stacks with FUNCTIONS distinct leaf functions, so `top`, `diff`, `export` and
/// `render` have that many rows; `shift` changes the counts for `diff`.
fn folded(shift: usize) -> String {
    let mut text = String::new();
    for i in 0..FUNCTIONS {
        let _ = writeln!(
            text,
            "demo-node;main;worker_{};function_with_a_long_name_{i:05} {}",
            i % 7,
            1 + (i * 31 + shift) % 97
        );
    }
    text
}

/// CAPTURES captures of `container`, each a manifest and its folded stacks.
fn build_store(cwd: &Path, container: &str) {
    let dir = cwd.join("profiling").join(container);
    for n in 0..CAPTURES {
        let created = Local::now() - Secs::seconds((CAPTURES - n) as i64 * 60);
        let stem = Stem::reserve(&dir, "perf", created).unwrap();
        // Every capture small except the newest two, which top, diff and export read.
        let content = if n + 2 >= CAPTURES {
            folded(n)
        } else {
            "demo-node;main 1\n".to_string()
        };
        fs::write(stem.path("folded"), &content).unwrap();
        let mut manifest = Manifest {
            devprof_version: "0.1.0".into(),
            kind: "cpu".into(),
            created: created.to_rfc3339(),
            target: container.into(),
            events: vec!["cpu-clock".into()],
            frequency_hz: 999,
            sample_count: 1,
            files: vec![FileRecord {
                name: stem.file_name("folded"),
                bytes: content.len() as u64,
            }],
            ..Default::default()
        };
        manifest.container.name = container.into();
        manifest.write(&stem).unwrap();
    }
}

/// Runs devprof with `args` (stdin from `input` when given), reads one line of its output
/// and closes the pipe: devprof must then exit 0 without a panic or an error.
fn first_line_then_close(cwd: &Path, args: &[&str], input: Option<&Path>) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("devprof"))
        .current_dir(cwd)
        .args(args)
        .env_remove("DEVPROF_OUTPUT_DIR")
        .stdin(match input {
            Some(p) => Stdio::from(fs::File::open(p).unwrap()),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(!line.is_empty(), "{args:?} printed nothing");
    // The reader is gone now; devprof's next write meets a closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{args:?} exited {:?} after its reader left: {stderr}",
        out.status.code()
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
}

#[test]
fn every_store_command_ends_quietly_when_its_reader_leaves() {
    let work = workdir();
    let cwd = work.path();
    build_store(cwd, "demo-seq");
    let big = cwd.join("big.folded");
    fs::write(&big, folded(0)).unwrap();
    let mut script = fs::File::create(cwd.join("big.script")).unwrap();
    for i in 0..FUNCTIONS {
        writeln!(
            script,
            "state_lookup     7/10     1085.945746: cpu-clock: \n\t           3877c demo_node::function_with_a_long_name_{i:05} (/usr/local/bin/demo-node)\n\t           4605c main (/usr/local/bin/demo-node)\n"
        )
        .unwrap();
    }
    drop(script);

    let n = FUNCTIONS.to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["ls"],
        vec!["ls", "demo-seq", "--json"],
        vec!["clean", "--older", "0s", "--dry-run"],
        vec!["clean", "demo-seq", "--older", "0s", "--dry-run", "--json"],
        vec!["top", "demo-seq", "-n", &n],
        vec!["top", "demo-seq", "-n", &n, "--json"],
        vec!["diff", "big.folded", "demo-seq", "-n", &n, "-o", "d.svg"],
        vec![
            "diff",
            "big.folded",
            "demo-seq",
            "-n",
            &n,
            "--json",
            "-o",
            "d.svg",
        ],
        vec!["export", "demo-seq", "-f", "collapsed", "-o", "-"],
        vec!["export", "demo-seq", "-f", "speedscope", "-o", "-"],
        vec!["render", "big.folded", "-o", "-"],
        vec!["render", "demo-seq", "-o", "-"],
    ];
    for args in &cases {
        first_line_then_close(cwd, args, None);
    }
    first_line_then_close(cwd, &["fold", "-"], Some(&cwd.join("big.script")));
    // And the clean that removes: its report outgrows the pipe too, and it still removes.
    first_line_then_close(cwd, &["clean", "--older", "0s"], None);
    assert!(fs::read_dir(cwd.join("profiling/demo-seq"))
        .map(|d| d.count() == 0)
        .unwrap_or(true));
}
