//! A runtime's perf map (`/tmp/perf-<pid>.map`) as the container holds it. The file is
//! the profiled process's: it is judged by type and size before anything opens it (perf
//! and `cat` follow whatever it is: a link to /dev/zero, a FIFO), and read with a bound
//! and a deadline, for perf in a sidecar and for devprof's own native fold.

use crate::docker::ContainerShell;
use std::time::Duration;

pub use crate::symbols::perfmap::PERF_MAP_LIMIT;

/// Longest the copy may take.
const COPY_LIMIT: Duration = Duration::from_secs(60);

/// `map_check MAP LIMIT`: whether a perf map may be read, judged by its type and size
/// before anything opens it: 0 a regular file within the limit, 2 not there, 3 a link, a
/// FIFO, a device or a directory (or in a directory that is a link), 4 over the limit;
/// prints why, in devprof's words, when it is not 0.
const MAP_CHECK_FN: &str = r#"
map_check() {
  m=$1; limit=$2; d=${m%/*}
  if [ -L "$d" ]; then echo "lies in a directory that is a symbolic link"; return 3; fi
  [ -d "$d" ] || { echo "is not there"; return 2; }
  if [ -L "$m" ]; then echo "is a symbolic link"; return 3; fi
  [ -e "$m" ] || { echo "is not there"; return 2; }
  if [ ! -f "$m" ]; then echo "is not a regular file (a FIFO, a device or a directory)"; return 3; fi
  set -f; set -- $(ls -ln "$m" 2>/dev/null); set +f
  case "${5-}" in ''|*[!0-9]*) echo "has a size that cannot be read"; return 3;; esac
  if [ "$5" -gt "$limit" ]; then echo "is $5 bytes, over the limit of $limit"; return 4; fi
  return 0
}
"#;

/// The sidecar's copy of the JVM's perf map: `$1` the map as the target sees it (through
/// /proc/<pid>/root), `$2` where the sidecar's perf looks, `$3` the size limit. The map is
/// refused by `map_check`; the copy reads at most the limit and one byte more, so a file
/// swapped in meanwhile can neither hang it for long nor fill the disk.
const COPY_BODY: &str = r#"
src=$1; dst=$2; limit=$3
why=$(map_check "$src" "$limit"); rc=$?
[ $rc -eq 0 ] || { echo "it $why" >&2; exit $rc; }
rm -f "$dst.devprof"
head -c $((limit + 1)) < "$src" > "$dst.devprof" || exit 5
set -f; set -- $(ls -ln "$dst.devprof" 2>/dev/null); set +f
if [ "${5:-0}" -gt "$limit" ]; then rm -f "$dst.devprof"; echo "it grew over the limit of $limit bytes while read" >&2; exit 4; fi
mv -f "$dst.devprof" "$dst"
"#;

fn copy_script() -> String {
    format!("{MAP_CHECK_FN}{COPY_BODY}")
}

/// Starts the line on which `map_check_text` prints its verdict.
const VERDICT: &str = "@@devprof-perf-map";

/// Shell text that judges the perf map of `pid` (`root`: the process's root as the shell
/// sees it, `/proc/<pid>/root` from a sidecar) and prints its verdict on one line,
/// `@@devprof-perf-map RC WHY`: another script may run it first (the prefetch beside the
/// copy-out), so no exec of its own is paid after the window.
pub fn map_check_text(pid: u32, root: Option<&str>) -> String {
    let map = crate::text::quote(&format!("{}/tmp/perf-{pid}.map", root.unwrap_or("")));
    format!("{MAP_CHECK_FN}why=$(map_check {map} {PERF_MAP_LIMIT}); echo \"{VERDICT} $? $why\"\n")
}

/// Whether perf must not read the perf map of `pid`, by the verdict `map_check_text`
/// printed as the first line of `stdout`: Some(why) when it is there but is no regular
/// file within `PERF_MAP_LIMIT`, or when no verdict came, or one the check never gives
/// (it could not be checked).
pub fn refused_by(stdout: &str, pid: u32) -> Option<String> {
    let verdict = stdout
        .lines()
        .next()
        .and_then(|line| line.strip_prefix(VERDICT))
        .and_then(|rest| rest.strip_prefix(' '));
    // No verdict, or a status the check never gives: it did not run through.
    let (code, why) = verdict
        .map(|v| v.split_once(' ').unwrap_or((v, "")))
        .unwrap_or(("", ""));
    let why = match code {
        "0" | "2" => return None,
        "3" | "4" => crate::text::printable(why.trim()),
        _ => "could not be checked".to_string(),
    };
    Some(format!("/tmp/perf-{pid}.map {why}"))
}

/// Whether perf must not read the perf map of `pid`: `refused_by` on a check of its own.
/// perf follows whatever the file is (a link to /dev/zero, a FIFO), so such a capture is
/// folded without it.
pub async fn perf_map_refused<S: ContainerShell>(
    shell: &S,
    pid: u32,
    root: Option<&str>,
) -> Option<String> {
    let script = map_check_text(pid, root);
    match tokio::time::timeout(COPY_LIMIT, shell.sh(&script)).await {
        Ok(Ok(out)) => refused_by(&out.stdout, pid),
        _ => refused_by("", pid),
    }
}

/// Copies /tmp/perf-<pid>.map from the target's root into the sidecar's /tmp (`shell`
/// runs in the sidecar). Err: a warning.
pub async fn copy_into_sidecar<S: ContainerShell>(shell: &S, pid: u32) -> Result<(), String> {
    let map = format!("/tmp/perf-{pid}.map");
    let src = format!("/proc/{pid}/root{map}");
    let limit = PERF_MAP_LIMIT.to_string();
    let script = copy_script();
    let argv = ["sh", "-c", &script, "sh", &src, &map, &limit];
    let unnamed = "; JIT-compiled Java frames stay unnamed";
    match tokio::time::timeout(COPY_LIMIT, shell.run(&argv)).await {
        Ok(Ok(out)) if out.success() => Ok(()),
        Ok(Ok(out)) => Err(format!(
            "the JVM's perf map {map} was not copied into the sidecar: {}{unnamed}",
            crate::text::printable(out.stderr.trim())
        )),
        Ok(Err(e)) => Err(format!(
            "the JVM's perf map could not be read: {e}{unnamed}"
        )),
        Err(_) => Err(format!(
            "copying the JVM's perf map {map} into the sidecar took over {} s; gave up{unnamed}",
            COPY_LIMIT.as_secs()
        )),
    }
}

/// Reads the perf map of `pid` out of the container (`root`: the process's root as the
/// shell sees it, `/proc/<pid>/root` from a sidecar), for the native fold. Err says why
/// not, in devprof's words: not there, refused by type or size, or too slow.
pub async fn read_perf_map<S: ContainerShell>(
    shell: &S,
    pid: u32,
    root: Option<&str>,
) -> Result<String, String> {
    let map = format!("{}/tmp/perf-{pid}.map", root.unwrap_or(""));
    let script = format!("{MAP_CHECK_FN}{READ_BODY}");
    let limit = PERF_MAP_LIMIT.to_string();
    let argv = ["sh", "-c", &script, "sh", &map, &limit];
    let shown = format!("/tmp/perf-{pid}.map");
    match tokio::time::timeout(COPY_LIMIT, shell.run(&argv)).await {
        Ok(Ok(out)) if out.success() && out.stdout.len() as u64 <= PERF_MAP_LIMIT => Ok(out.stdout),
        Ok(Ok(out)) if out.success() => Err(format!(
            "{shown} grew over the limit of {PERF_MAP_LIMIT} bytes while read"
        )),
        Ok(Ok(out)) => Err(format!(
            "{shown} {}",
            crate::text::printable(out.stderr.trim())
        )),
        Ok(Err(e)) => Err(format!("{shown} could not be read: {e}")),
        Err(_) => Err(format!(
            "reading {shown} took over {} s; gave up",
            COPY_LIMIT.as_secs()
        )),
    }
}

/// Reads a JIT runtime's file named by the recording (its jitdump, `path` as the process
/// sees it; `root` as in `read_perf_map`), bytes as they are: judged by type and size
/// first like a perf map, at most `PERF_MAP_LIMIT` read. Err says why not.
pub async fn read_jit_file(
    shell: &crate::docker::Shell,
    path: &str,
    root: Option<&str>,
) -> Result<Vec<u8>, String> {
    use std::io::Read;
    // A file directly under the root is checked in `ROOT/.`: the root itself may be a
    // link (/proc/<pid>/root from a sidecar), and an empty directory names nothing.
    let path = match path.rsplit_once('/') {
        Some(("", name)) => format!("/./{name}"),
        _ => path.to_string(),
    };
    let file = format!("{}{path}", root.unwrap_or(""));
    let script = format!("{MAP_CHECK_FN}{READ_BODY}");
    let argv: Vec<String> = [
        "sh",
        "-c",
        &script,
        "sh",
        &file,
        &PERF_MAP_LIMIT.to_string(),
    ]
    .map(str::to_string)
    .to_vec();
    let read = shell.stream_to(&argv, None, |reader| {
        let mut bytes = Vec::new();
        reader.take(PERF_MAP_LIMIT + 1).read_to_end(&mut bytes)?;
        Ok(bytes)
    });
    match tokio::time::timeout(COPY_LIMIT, read).await {
        Ok(Ok((bytes, out))) if out.success() && bytes.len() as u64 <= PERF_MAP_LIMIT => Ok(bytes),
        Ok(Ok((_, out))) if out.success() => Err(format!(
            "it grew over the limit of {PERF_MAP_LIMIT} bytes while read"
        )),
        Ok(Ok((_, out))) => Err(format!("it {}", crate::text::printable(out.stderr.trim()))),
        Ok(Err(e)) => Err(format!("it could not be read: {e}")),
        Err(_) => Err(format!(
            "reading it took over {} s; gave up",
            COPY_LIMIT.as_secs()
        )),
    }
}

/// The read behind `read_perf_map`: `$1` the map, `$2` the limit; the map on stdout, at
/// most the limit and one byte more, or why not on stderr. A map that grew past the limit
/// while read fails after it (the exec's own cap would cut it silently at the limit).
const READ_BODY: &str = r#"
why=$(map_check "$1" "$2"); rc=$?
[ $rc -eq 0 ] || { echo "$why" >&2; exit $rc; }
head -c $(($2 + 1)) < "$1"
set -f; set -- "$2" $(ls -ln "$1" 2>/dev/null); set +f
[ "${6:-0}" -le "$1" ] || { echo "grew over the limit of $1 bytes while read" >&2; exit 4; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &std::path::Path) {
        assert!(std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success());
    }

    /// Runs the copy script on this host: `map` in a `tmp` directory of a scratch root,
    /// copied to the scratch directory's `out.map`. Returns the exit status and whether
    /// the copy is there; panics when the script is still running after 5 s.
    fn copy(make: impl Fn(&std::path::Path), limit: u64) -> (i32, Option<Vec<u8>>) {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join("root");
        std::fs::create_dir_all(root.join("tmp")).unwrap();
        let map = root.join("tmp/perf-7.map");
        make(&map);
        let dst = scratch.path().join("out.map");
        let mut child = std::process::Command::new("sh")
            .args(["-c", &copy_script(), "sh"])
            .arg(&map)
            .arg(&dst)
            .arg(limit.to_string())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(5) {
                let _ = child.kill();
                panic!("the copy did not end: it opened what it should have refused");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status.code().unwrap_or(-1), std::fs::read(&dst).ok())
    }

    /// Runs commands on this host, as a container would.
    struct Host;

    impl ContainerShell for Host {
        fn container(&self) -> &str {
            "host"
        }
        async fn run(&self, argv: &[&str]) -> crate::error::Result<crate::docker::ExecOutput> {
            let out = std::process::Command::new(argv[0])
                .args(&argv[1..])
                .output()
                .unwrap();
            Ok(crate::docker::ExecOutput {
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                exit_code: out.status.code().map(i64::from),
            })
        }
    }

    #[tokio::test]
    async fn jit_perf_map_perf_would_follow_is_never_handed_to_it() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("tmp")).unwrap();
        let root_text = root.path().to_string_lossy().into_owned();
        let check = || perf_map_refused(&Host, 7, Some(&root_text));
        assert_eq!(check().await, None, "no map: nothing to refuse");
        let map = root.path().join("tmp/perf-7.map");
        std::fs::write(&map, b"7f00 10 java_frame\n").unwrap();
        assert_eq!(check().await, None);
        std::fs::remove_file(&map).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &map).unwrap();
        let why = check().await.unwrap();
        assert!(why.contains("/tmp/perf-7.map is a symbolic link"), "{why}");
        std::fs::remove_file(&map).unwrap();
        mkfifo(&map);
        assert!(check().await.unwrap().contains("not a regular file"));
    }

    #[test]
    fn jit_perf_map_link_fifo_or_oversized_is_refused_by_type_before_reading() {
        let regular = |p: &std::path::Path| std::fs::write(p, b"7f00 10 java_frame\n").unwrap();
        assert_eq!(
            copy(regular, 1024),
            (0, Some(b"7f00 10 java_frame\n".to_vec()))
        );
        // A link to /dev/zero (would fill the disk) and a FIFO (would hang): refused.
        let to_zero = |p: &std::path::Path| std::os::unix::fs::symlink("/dev/zero", p).unwrap();
        assert_eq!(copy(to_zero, 1024), (3, None));
        let fifo = |p: &std::path::Path| mkfifo(p);
        assert_eq!(copy(fifo, 1024), (3, None));
        let dir = |p: &std::path::Path| std::fs::create_dir(p).unwrap();
        assert_eq!(copy(dir, 1024), (3, None));
        // Over the limit by its size: refused, not cut.
        assert_eq!(copy(regular, 8), (4, None));
        // The map's directory a link (to anywhere): refused.
        let tmp_link = |p: &std::path::Path| {
            let tmp = p.parent().unwrap();
            std::fs::remove_dir(tmp).unwrap();
            std::os::unix::fs::symlink("/dev", tmp).unwrap();
        };
        assert_eq!(copy(tmp_link, 1024), (3, None));
        assert_eq!(copy(|_| {}, 1024), (2, None), "no map at all");
    }

    #[tokio::test]
    async fn the_native_fold_reads_a_regular_map_and_refuses_a_link_or_fifo() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("tmp")).unwrap();
        let root_text = root.path().to_string_lossy().into_owned();
        let read = || read_perf_map(&Host, 7, Some(&root_text));
        assert!(read().await.unwrap_err().contains("is not there"));
        let map = root.path().join("tmp/perf-7.map");
        std::fs::write(&map, b"7f00 10 java_frame\n").unwrap();
        assert_eq!(read().await.unwrap(), "7f00 10 java_frame\n");
        std::fs::remove_file(&map).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &map).unwrap();
        assert!(read().await.unwrap_err().contains("is a symbolic link"));
        std::fs::remove_file(&map).unwrap();
        mkfifo(&map);
        assert!(read().await.unwrap_err().contains("not a regular file"));
    }
}
