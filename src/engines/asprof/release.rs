//! Where async-profiler comes from: a release directory in the container that only root
//! may change (`asprof` on PATH, the container's own `$ASYNC_PROFILER_HOME`,
//! `/opt/*async-profiler*/`), or one on the host that is copied in for the capture (its
//! layout is checked with the settings). Both have the layout of async-profiler's release
//! tarballs: `bin/asprof` and `lib/libasyncProfiler.so`. A home the JVM's own environment
//! names is never used (a process chose it): the user is told how to use it instead.

use crate::docker::probe::TRUSTED_FN;
use crate::docker::wire::{self, records};
use crate::docker::ContainerShell;

pub use crate::settings::capture::{AGENT_LIB, ASPROF_BIN};

/// Prints `home<TAB>DIR` for the first release directory in the container whose
/// `bin/asprof` is executable, which has the agent library, and which `trusted` accepts
/// (root's alone, links included).
const FIND_BODY: &str = r#"
for f in "$(command -v asprof 2>/dev/null)" "${ASYNC_PROFILER_HOME:+$ASYNC_PROFILER_HOME/bin/asprof}" /opt/*async-profiler*/bin/asprof; do
  [ -n "$f" ] || continue
  r=$(trusted "$f") && [ -x "$r" ] || continue
  home=${r%/bin/asprof}
  [ "$home" != "$r" ] && trusted "$home/lib/libasyncProfiler.so" >/dev/null || continue
  printf 'home\t'; printf '%s' "$home" | enc NAME_LIMIT; echo
  exit 0
done
exit 1
"#;

/// The search script: the shell functions, then the search.
pub fn find_script() -> String {
    format!(
        "{}{TRUSTED_FN}{}",
        wire::PRELUDE,
        FIND_BODY.replace("NAME_LIMIT", &wire::NAME_LIMIT.to_string())
    )
}

/// The release directory of async-profiler in the container, if there is one that only
/// root may change.
pub async fn find_in_container<S: ContainerShell>(shell: &S) -> Option<String> {
    let out = shell.sh(&find_script()).await.ok()?;
    if !out.success() {
        return None;
    }
    let home = records(&out.stdout)
        .find(|r| r.key == "home")
        .and_then(|r| r.bytes(0))
        .and_then(|b| String::from_utf8(b).ok())?;
    (home.starts_with('/') && !home.chars().any(char::is_control)).then_some(home)
}

/// What to tell the user when the JVM's environment names an async-profiler home
/// (`ASYNC_PROFILER_HOME`) that devprof does not use: it runs nothing a process's
/// environment names. None when there is nothing to say.
pub fn ignored_home_note(jvm_home: Option<&str>, used: Option<&str>) -> Option<String> {
    let named = jvm_home
        .map(|h| h.trim_end_matches('/'))
        .filter(|h| !h.is_empty())?;
    if used.map(|u| u.trim_end_matches('/')) == Some(named) {
        return None;
    }
    let named = crate::text::printable(named);
    Some(format!(
        "the JVM's environment names async-profiler at {named} (ASYNC_PROFILER_HOME); devprof does not run \
         what a process's environment names, and looks only where root alone may write (asprof on PATH, \
         /opt/*async-profiler*/){}: to use that release, copy it to this host and pass --asprof DIR \
         (DEVPROF_ASPROF), or install it root-owned under /opt in the image",
        match used {
            Some(home) => format!("; it uses {home}"),
            None => String::new(),
        }
    ))
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
    fn asprof_home_from_the_jvms_environment_is_never_used_and_said() {
        // The search takes no argument (the JVM's variable was its `$1`): it reads only
        // its own environment's.
        assert!(!FIND_BODY.contains("$1") && !FIND_BODY.contains("${1"));
        let note = ignored_home_note(Some("/home/app/ap/"), None).unwrap();
        assert!(
            note.contains("/home/app/ap") && note.contains("--asprof DIR"),
            "{note}"
        );
        let note = ignored_home_note(Some("/home/app/ap"), Some("/opt/async-profiler")).unwrap();
        assert!(note.contains("it uses /opt/async-profiler"), "{note}");
        assert_eq!(ignored_home_note(Some("/opt/ap/"), Some("/opt/ap")), None);
        assert_eq!(ignored_home_note(None, Some("/opt/ap")), None);
        assert_eq!(ignored_home_note(Some(""), None), None);
        assert!(!ignored_home_note(Some("/x\ny"), None)
            .unwrap()
            .contains('\n'));
    }

    #[test]
    fn the_upload_directory_follows_the_library_content() {
        assert_eq!(upload_dir(b"a"), upload_dir(b"a"));
        assert_ne!(upload_dir(b"a"), upload_dir(b"b"));
        assert!(upload_dir(b"a").starts_with("/tmp/devprof.asprof-"));
    }
}
