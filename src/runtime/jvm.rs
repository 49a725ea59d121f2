//! JVM targets: the HotSpot flags that decide how Java frames get names, read from the
//! places the JVM reads them, and the perf map the JVM writes on request
//! (`jcmd PID Compiler.perfmap`, JDK 17+) so that perf can name JIT-compiled code.

use super::ProcessFacts;
use crate::docker::{ExecOutput, Shell};
use crate::text::{printable, quote};
use std::time::Duration;

/// The HotSpot options that matter to profiling, as the running JVM sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JvmOptions {
    /// `-XX:+PreserveFramePointer`: JIT code keeps frame pointers, so perf's frame-pointer
    /// unwinding walks whole Java stacks.
    pub preserve_frame_pointer: bool,
    /// `-XX:+DisableAttachMechanism`: no jcmd, no async-profiler, no perf map on request.
    pub attach_disabled: bool,
    /// Where the attach flag came from (`JAVA_TOOL_OPTIONS`, `the command line`, ...).
    pub attach_flag_source: Option<String>,
}

/// Where the JVM takes options from, in the order it applies them (a later setting wins):
/// JAVA_TOOL_OPTIONS, then JDK_JAVA_OPTIONS (prepended to the launcher's arguments), the
/// command line, and _JAVA_OPTIONS last.
pub fn options(facts: &ProcessFacts, cmdline: &str) -> JvmOptions {
    let sources: Vec<(&str, &str)> = vec![
        (
            "JAVA_TOOL_OPTIONS",
            facts.env("JAVA_TOOL_OPTIONS").unwrap_or(""),
        ),
        (
            "JDK_JAVA_OPTIONS",
            facts.env("JDK_JAVA_OPTIONS").unwrap_or(""),
        ),
        ("the command line", cmdline),
        ("_JAVA_OPTIONS", facts.env("_JAVA_OPTIONS").unwrap_or("")),
    ];
    let mut out = JvmOptions::default();
    for (source, text) in sources {
        for word in text.split_whitespace() {
            match boolean_flag(word) {
                Some(("PreserveFramePointer", on)) => out.preserve_frame_pointer = on,
                Some(("DisableAttachMechanism", on)) => {
                    out.attach_disabled = on;
                    out.attach_flag_source = on.then(|| source.to_string());
                }
                _ => {}
            }
        }
    }
    out
}

/// `-XX:+Name` -> (Name, true), `-XX:-Name` -> (Name, false).
fn boolean_flag(word: &str) -> Option<(&str, bool)> {
    let rest = word.strip_prefix("-XX:")?;
    if let Some(name) = rest.strip_prefix('+') {
        Some((name, true))
    } else {
        rest.strip_prefix('-').map(|name| (name, false))
    }
}

/// The Java feature version a JDK install path shows (`/usr/lib/jvm/java-17-openjdk-amd64`,
/// `/opt/jdk-21.0.2`, `/usr/lib/jvm/temurin-11-jdk`), when it shows one.
pub fn version_from_path(exe: &str) -> Option<u32> {
    exe.split('/').find_map(|part| {
        let rest = part
            .strip_prefix("java-")
            .or_else(|| part.strip_prefix("jdk-"))
            .or_else(|| part.strip_prefix("jdk"))
            .or_else(|| part.strip_prefix("jre-"))
            .or_else(|| part.strip_prefix("temurin-"))
            .or_else(|| part.strip_prefix("openjdk-"))?;
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let version: u32 = digits.parse().ok()?;
        // `java-1.8.0-openjdk`: Java 8.
        if version == 1 {
            rest.strip_prefix("1.")
                .and_then(|r| r.split(['.', '-', '_']).next())
                .and_then(|v| v.parse().ok())
        } else {
            Some(version)
        }
    })
}

/// The warning for a JVM without PreserveFramePointer, with the remedy.
pub const NO_FRAME_POINTER_WARNING: &str =
    "the JVM runs without -XX:+PreserveFramePointer: perf's frame-pointer stacks through \
     JIT-compiled Java code come out cut short. Start it with the flag, e.g. set \
     JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer in the service's environment (compose \
     `environment:`, or `devprof compose --services SERVICE --jvm`) and recreate the container";

/// The warning for a perf capture of a JVM that refuses attach.
pub fn attach_disabled_warning(options: &JvmOptions) -> String {
    format!(
        "the JVM runs with -XX:+DisableAttachMechanism (from {}): devprof cannot ask it for a \
         perf map (jcmd Compiler.perfmap), so JIT-compiled Java frames stay unnamed. Remove the \
         flag and recreate the container to get Java names",
        options
            .attach_flag_source
            .as_deref()
            .unwrap_or("its options")
    )
}

/// How long jcmd may take (it starts a JVM of its own, then waits for the target's reply).
const JCMD_TIMEOUT: Duration = Duration::from_secs(60);

/// The shell script that runs the JDK's jcmd next to the JVM's own executable, then
/// `$JAVA_HOME/bin/jcmd`, then jcmd on PATH; 127 when there is none.
pub fn jcmd_script(exe: &str, java_home: Option<&str>, pid: u32, command: &str) -> String {
    let mut candidates: Vec<String> = Vec::new();
    if let Some((dir, _)) = exe.rsplit_once('/') {
        candidates.push(format!("{dir}/jcmd"));
    }
    if let Some(home) = java_home.filter(|h| !h.is_empty()) {
        candidates.push(format!("{}/bin/jcmd", home.trim_end_matches('/')));
    }
    candidates.push("jcmd".into());
    format!(
        "for j in {}; do if command -v \"$j\" >/dev/null 2>&1; then exec \"$j\" {pid} {}; fi; done; \
         echo 'no jcmd in the container (it ships with the JDK, not the JRE)' >&2; exit 127",
        candidates
            .iter()
            .map(|c| quote(c))
            .collect::<Vec<_>>()
            .join(" "),
        quote(command)
    )
}

/// Asks the JVM `pid` (as seen in the container of `shell`) to write
/// /tmp/perf-<pid>.map, running jcmd as the JVM's own user (the attach protocol accepts
/// only that user). Err: why not, in one line.
pub async fn write_perf_map(
    shell: &Shell,
    pid: u32,
    facts: &ProcessFacts,
) -> std::result::Result<(), String> {
    let Some(user) = facts.exec_user() else {
        return Err("the JVM's user is unknown (no /proc/<pid>/status)".into());
    };
    let script = jcmd_script(&facts.exe, facts.env("JAVA_HOME"), pid, "Compiler.perfmap");
    let ran = tokio::time::timeout(JCMD_TIMEOUT, shell.run_as(&user, &["sh", "-c", &script]))
        .await
        .map_err(|_| format!("jcmd did not answer within {} s", JCMD_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())?;
    jcmd_result(&ran)
}

/// Whether jcmd's run succeeded; jcmd reports attach failures on stdout with exit 1. Err:
/// the line of jcmd's reply that says why, as the container printed it but on one line
/// (`printable`: an escape sequence in it is shown, not obeyed).
pub fn jcmd_result(out: &ExecOutput) -> std::result::Result<(), String> {
    let text = format!("{}\n{}", out.stdout, out.stderr);
    let failed_text = text.contains("Exception") || text.contains("Could not find");
    if out.success() && !failed_text {
        return Ok(());
    }
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.ends_with(':'))
        .unwrap_or("jcmd failed without a message");
    Err(printable(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(env: &[(&str, &str)]) -> ProcessFacts {
        ProcessFacts {
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn flags_follow_the_jvms_order_of_sources() {
        let f = facts(&[("JAVA_TOOL_OPTIONS", "-XX:+PreserveFramePointer")]);
        let o = options(&f, "java -Xmx64m -cp /app DemoJvm");
        assert!(o.preserve_frame_pointer && !o.attach_disabled);

        // The command line wins over JAVA_TOOL_OPTIONS, _JAVA_OPTIONS over both.
        let o = options(&f, "java -XX:-PreserveFramePointer -cp /app DemoJvm");
        assert!(!o.preserve_frame_pointer);
        let f = facts(&[
            ("JAVA_TOOL_OPTIONS", "-XX:-PreserveFramePointer"),
            (
                "_JAVA_OPTIONS",
                "-XX:+PreserveFramePointer -XX:+DisableAttachMechanism",
            ),
        ]);
        let o = options(&f, "java -cp /app DemoJvm");
        assert!(o.preserve_frame_pointer && o.attach_disabled);
        assert_eq!(o.attach_flag_source.as_deref(), Some("_JAVA_OPTIONS"));

        let o = options(
            &facts(&[]),
            "java -XX:+DisableAttachMechanism -XX:-DisableAttachMechanism Main",
        );
        assert!(!o.attach_disabled && o.attach_flag_source.is_none());
        assert!(!options(&facts(&[]), "java Main").preserve_frame_pointer);
    }

    #[test]
    fn java_versions_from_install_paths() {
        assert_eq!(
            version_from_path("/usr/lib/jvm/java-17-openjdk-amd64/bin/java"),
            Some(17)
        );
        assert_eq!(version_from_path("/opt/jdk-21.0.2/bin/java"), Some(21));
        assert_eq!(
            version_from_path("/usr/lib/jvm/java-1.8.0-openjdk/jre/bin/java"),
            Some(8)
        );
        assert_eq!(version_from_path("/usr/bin/java"), None);
    }

    #[test]
    fn jcmd_is_looked_up_beside_the_jvm_first() {
        let s = jcmd_script(
            "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
            Some("/opt/java/"),
            7,
            "Compiler.perfmap",
        );
        let jdk = s
            .find("/usr/lib/jvm/java-17-openjdk-amd64/bin/jcmd")
            .unwrap();
        let home = s.find("/opt/java/bin/jcmd").unwrap();
        assert!(jdk < home && s.contains("exec \"$j\" 7 'Compiler.perfmap'"));
    }

    #[test]
    fn jcmd_failures_are_read_from_its_output() {
        let ok = ExecOutput {
            stdout: "7:\n".into(),
            exit_code: Some(0),
            ..Default::default()
        };
        assert_eq!(jcmd_result(&ok), Ok(()));
        // What jcmd prints when the JVM refuses to attach (real output, JDK 17).
        let refused = ExecOutput {
            stdout: "7:\ncom.sun.tools.attach.AttachNotSupportedException: Unable to open socket file /proc/7/root/tmp/.java_pid7: target process 7 doesn't respond within 10500ms or HotSpot VM not loaded\n".into(),
            exit_code: Some(1),
            ..Default::default()
        };
        assert!(jcmd_result(&refused)
            .unwrap_err()
            .starts_with("com.sun.tools.attach.AttachNotSupportedException"));
        // The reply is the container's: its escape sequences are shown, not obeyed.
        let forged = ExecOutput {
            stdout: "7:\nException \u{1b}[1A\u{1b}[2K\r\u{9b}2K\u{2713} ok\u{7}\n".into(),
            exit_code: Some(1),
            ..Default::default()
        };
        assert_eq!(
            jcmd_result(&forged).unwrap_err(),
            "Exception \\u{1b}[1A\\u{1b}[2K\\r\\u{9b}2K\u{2713} ok\\u{7}"
        );
    }
}
