//! Where async-profiler comes from: a release directory in the container (`asprof` on
//! PATH, `$ASYNC_PROFILER_HOME`, `/opt/*async-profiler*/`), or one on the host that is
//! copied in for the capture (its layout is checked with the settings). Both have the
//! layout of async-profiler's release tarballs: `bin/asprof` and `lib/libasyncProfiler.so`.

use crate::docker::ContainerShell;

pub use crate::settings::capture::{AGENT_LIB, ASPROF_BIN};

/// Prints the first release directory found in the container whose `bin/asprof` is
/// executable and which has the agent library; `$1` is the JVM's ASYNC_PROFILER_HOME.
const FIND_SCRIPT: &str = r#"
for f in "$(command -v asprof 2>/dev/null)" "${1:+$1/bin/asprof}" "${ASYNC_PROFILER_HOME:+$ASYNC_PROFILER_HOME/bin/asprof}" /opt/*async-profiler*/bin/asprof; do
  [ -n "$f" ] && [ -f "$f" ] && [ -x "$f" ] || continue
  f=$(readlink -f "$f")
  home=${f%/bin/asprof}
  [ "$home" != "$f" ] && [ -f "$home/lib/libasyncProfiler.so" ] && { printf '%s\n' "$home"; exit 0; }
done
exit 1
"#;

/// The release directory of async-profiler in the container, if there is one.
pub async fn find_in_container<S: ContainerShell>(
    shell: &S,
    jvm_home: Option<&str>,
) -> Option<String> {
    let out = shell
        .run(&["sh", "-c", FIND_SCRIPT, "sh", jvm_home.unwrap_or("")])
        .await
        .ok()?;
    let home = out.stdout.lines().next()?.trim().to_string();
    (out.success() && home.starts_with('/')).then_some(home)
}

/// Where a host release is copied in the container: one fixed directory per library
/// content, so that a JVM that already loaded the agent from an earlier capture is handed
/// the same path again (a JVM keeps an agent loaded for good, and loading one from a new
/// path would start a second profiler in it).
pub fn upload_dir(lib: &[u8]) -> String {
    // FNV-1a: a stable name for the content, not a security measure.
    let mut hash: u64 = 0xcbf29ce484222325;
    for b in lib {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x100000001b3);
    }
    format!("/tmp/devprof.asprof-{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upload_directory_follows_the_library_content() {
        assert_eq!(upload_dir(b"a"), upload_dir(b"a"));
        assert_ne!(upload_dir(b"a"), upload_dir(b"b"));
        assert!(upload_dir(b"a").starts_with("/tmp/devprof.asprof-"));
    }
}
