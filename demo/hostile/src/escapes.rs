//! `HOSTILE_ROLE=escapes`: a container of its own (tests/terminal_escapes.rs starts one
//! from this image and removes it) whose processes put terminal control sequences into
//! every text devprof shows a person (finding 4 of the security review): ESC sequences
//! that move the cursor up and erase the line, a carriage return, a C1 CSI, BEL, a line
//! feed, and a forged "✓" line. Each place gets its own word (`FORGED-EXE`, ...), so a
//! test sees that the text reached devprof's output, and that it arrived escaped.
//!
//! Processes (PID 1 keeps them running; `/tmp/e/ready` once they are up):
//! - `esc-go`: an executable named with the sequences (a copy of this binary with Go's
//!   build-info marker appended, so devprof takes it for Go) serving a net/http/pprof
//!   lookalike on 127.0.0.1:6060 whose profiles' sample types hold the sequences,
//! - `esc-java`: a JVM lookalike in a JDK directory named with them, whose jcmd answers
//!   with them,
//! - `esc-conf`: `MALLOC_CONF` holding them, without prof:true,
//! - `esc-dumps`: profiling on, prof_prefix in a directory named with them, and a dump
//!   whose text holds them where the parser quotes it in its error.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Where everything of this mode lives.
pub const DIR: &str = "/tmp/e";
/// The pprof lookalike's port, where Go services usually serve it.
const PPROF_ADDR: &str = "127.0.0.1:6060";

/// Text that rewrites the terminal when obeyed: up a line, erase it, back to its start, a
/// C1 CSI, a forged check mark with `word`, BEL; then a line feed and a forged line. No
/// `/`, `,` or `:`, so it fits a file name, a `MALLOC_CONF` option and a dump's line.
pub fn forge(word: &str) -> String {
    format!("{}\n\u{2713} {word}", forge_line(word))
}

/// `forge` without the line feed: what fits one line.
pub fn forge_line(word: &str) -> String {
    format!("x\u{1b}[1A\u{1b}[2K\r\u{9b}2K\u{2713} {word} ok\u{7}")
}

fn exe_path() -> PathBuf {
    Path::new(DIR).join(format!("hostile{}", forge("FORGED-EXE")))
}

fn go_path() -> PathBuf {
    Path::new(DIR).join(format!("go{}", forge("FORGED-EXE")))
}

fn jdk_path() -> PathBuf {
    Path::new(DIR).join(format!("jdk{}", forge("FORGED-EXE")))
}

/// The directory of the dumps `esc-dumps` writes (its prof_prefix's).
fn dump_dir() -> PathBuf {
    Path::new(DIR).join(format!("d{}", forge("FORGED-PREFIX")))
}

/// Go's build-info marker (what devprof's probe greps an executable for), made at run time
/// so that this binary itself does not hold it and stays native.
fn go_marker() -> Vec<u8> {
    b"Hp!cvjmejog;"
        .iter()
        .map(|b| b.wrapping_sub(std::hint::black_box(1)))
        .collect()
}

/// One process of the mode: its executable, its argv[1] (what `--process` matches), and
/// its environment.
struct Spec {
    program: PathBuf,
    tag: &'static str,
    env: Vec<(&'static str, String)>,
}

impl Spec {
    fn spawn(&self) -> std::io::Result<Child> {
        let mut cmd = Command::new(&self.program);
        cmd.arg0(&self.program).arg(self.tag).env_clear();
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.spawn()
    }
}

fn specs() -> Vec<Spec> {
    let path = ("PATH", "/usr/local/bin:/usr/bin:/bin".to_string());
    let jdk = jdk_path();
    vec![
        Spec {
            program: go_path(),
            tag: "esc-go",
            env: vec![("HOSTILE_ROLE", "esc-go".into()), path.clone()],
        },
        Spec {
            program: jdk.join("bin/java"),
            tag: "esc-java",
            env: vec![
                ("HOSTILE_ROLE", "java".into()),
                ("HOSTILE_MAP", "none".into()),
                ("JAVA_HOME", jdk.display().to_string()),
                path.clone(),
            ],
        },
        Spec {
            program: exe_path(),
            tag: "esc-conf",
            env: vec![
                ("HOSTILE_ROLE", "idle".into()),
                (
                    "MALLOC_CONF",
                    format!(
                        "prof_active:true,prof_prefix:{DIR}/c{}/jeprof",
                        forge("FORGED-CONF")
                    ),
                ),
                path.clone(),
            ],
        },
        Spec {
            program: exe_path(),
            tag: "esc-dumps",
            env: vec![
                ("HOSTILE_ROLE", "esc-dumps".into()),
                (
                    "MALLOC_CONF",
                    format!(
                        "prof:true,prof_active:true,prof_prefix:{}/jeprof",
                        dump_dir().display()
                    ),
                ),
                path,
            ],
        },
    ]
}

/// Copies this binary to `to` (with `extra` appended), executable.
fn copy_self(to: &Path, extra: &[u8]) -> std::io::Result<()> {
    let exe = std::env::current_exe()?;
    let mut bytes = std::fs::read(exe)?;
    bytes.extend_from_slice(extra);
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(to, bytes)?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))
}

/// The jcmd beside the JVM lookalike: it answers the attach the way jcmd reports a
/// refusal, with the sequences in the line devprof quotes.
fn plant_jcmd(jdk: &Path) -> std::io::Result<()> {
    let reply = Path::new(DIR).join("jcmd-reply");
    std::fs::write(
        &reply,
        format!(
            "com.sun.tools.attach.AttachNotSupportedException {}\n",
            forge_line("FORGED-JCMD")
        ),
    )?;
    let jcmd = jdk.join("bin/jcmd");
    std::fs::write(
        &jcmd,
        format!(
            "#!/bin/sh\n# Planted by demo-hostile (escapes): a reply with terminal control sequences.\n\
             echo \"$1:\"\ncat {}\nexit 1\n",
            reply.display()
        ),
    )?;
    std::fs::set_permissions(jcmd, std::fs::Permissions::from_mode(0o755))
}

fn plant() -> std::io::Result<()> {
    let dir = Path::new(DIR);
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    copy_self(&exe_path(), b"")?;
    let mut go = vec![0u8];
    go.extend(go_marker());
    go.push(0);
    copy_self(&go_path(), &go)?;
    let jdk = jdk_path();
    copy_self(&jdk.join("bin/java"), b"")?;
    plant_jcmd(&jdk)
}

/// PID 1 of the mode: plants the files, starts the processes and keeps them running.
pub fn supervise() -> ! {
    if let Err(e) = plant() {
        eprintln!("hostile escapes: planting failed: {e}");
        std::process::exit(1);
    }
    let specs = specs();
    let mut running: Vec<Option<Child>> = specs.iter().map(|s| s.spawn().ok()).collect();
    // Ready once the pprof lookalike listens and the dump is written.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        let listening = TcpStream::connect(PPROF_ADDR).is_ok();
        if listening && dumps_written() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::write(Path::new(DIR).join("ready"), b"ready\n");
    println!("hostile escapes: running, pid {}", std::process::id());
    crate::keep_running(&specs, &mut running, |s| s.spawn())
}

fn dumps_written() -> bool {
    std::fs::read_dir(dump_dir()).is_ok_and(|mut entries| entries.next().is_some())
}

/// `esc-dumps`: a dump of this process (named as jemalloc names them) whose third line is
/// not one a dump has; the parser's error quotes it.
pub fn dumps() -> ! {
    let dir = dump_dir();
    let text = format!(
        "heap_v2/524288\n  t*: 1: 2097152 [1: 2097152]\n{}\n\nMAPPED_LIBRARIES:\n",
        forge_line("FORGED-DUMP")
    );
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(
            dir.join(format!("jeprof.{}.1.m1.heap", std::process::id())),
            text,
        )
    });
    if let Err(e) = written {
        eprintln!("hostile escapes: the dump: {e}");
    }
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// `esc-go`: a net/http/pprof lookalike whose every profile has sample types named with
/// the sequences (and none of the types devprof asks for).
pub fn go() -> ! {
    let listener = match TcpListener::bind(PPROF_ADDR) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("hostile escapes: bind {PPROF_ADDR}: {e}");
            std::process::exit(1);
        }
    };
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || answer(stream));
    }
    std::process::exit(1);
}

fn answer(mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 << 10 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let request = String::from_utf8_lossy(&request);
    let target = request.split_whitespace().nth(1).unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (status, kind, body) = match path {
        "/debug/pprof/" => (
            "200 OK",
            "text/html",
            b"<html><body>/debug/pprof/ <a href=\"heap\">heap</a> <a href=\"profile\">profile</a></body></html>\n"
                .to_vec(),
        ),
        p if p.starts_with("/debug/pprof/") => {
            // A CPU profile takes its seconds, as Go's does.
            let seconds = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("seconds="))
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            std::thread::sleep(Duration::from_secs(seconds.min(30)));
            ("200 OK", "application/octet-stream", profile())
        }
        _ => ("404 Not Found", "text/plain", b"404 page not found\n".to_vec()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
}

/// A pprof Profile (protobuf, not gzipped: devprof reads both) with two sample types named
/// with the sequences, and no sample.
fn profile() -> Vec<u8> {
    let strings = [
        String::new(),
        forge("FORGED-PPROF"),
        "bytes".to_string(),
        format!("count{}", forge_line("FORGED-PPROF")),
    ];
    let mut out = Vec::new();
    for (kind, unit) in [(1u64, 2u64), (3, 2)] {
        let mut value_type = Vec::new();
        field_varint(&mut value_type, 1, kind);
        field_varint(&mut value_type, 2, unit);
        field_bytes(&mut out, 1, &value_type);
    }
    for s in &strings {
        field_bytes(&mut out, 6, s.as_bytes());
    }
    out
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_varint(out: &mut Vec<u8>, field: u64, v: u64) {
    varint(out, field << 3);
    varint(out, v);
}

fn field_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_marker_is_made_at_run_time() {
        assert_eq!(go_marker(), b"Go buildinf:");
    }

    #[test]
    fn the_forgeries_fit_a_file_name_a_malloc_conf_option_and_a_dump_line() {
        for text in [forge("W"), forge_line("W")] {
            assert!(!text.contains(['/', ',', ':', '\0']), "{text:?}");
            assert!(text.contains('\u{1b}') && text.contains('\r') && text.contains('\u{9b}'));
        }
        assert!(forge("W").contains('\n') && !forge_line("W").contains('\n'));
    }

    #[test]
    fn the_profile_is_a_protobuf_of_sample_types_and_strings() {
        let p = profile();
        // sample_type {type: 1, unit: 2}: field 1, length 4, then the two varints.
        assert_eq!(&p[..6], &[0x0a, 4, 0x08, 1, 0x10, 2]);
        // The string table starts with the empty string (field 6, length 0).
        assert!(p.windows(2).any(|w| w == [0x32, 0]));
    }
}
