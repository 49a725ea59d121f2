//! Names for JIT-compiled code in perf captures: a JVM writes its perf map on request at
//! the end of the window (so it lists everything compiled up to then), and in sidecar mode
//! the map is placed where the sidecar's perf looks for it.

use super::target::Target;
use crate::runtime::jvm::{self, JvmOptions};
use crate::runtime::Runtime;
use crate::signals::Interrupts;

/// What a JVM's options mean for a capture by an engine that reads perf maps: the
/// warnings to print once, before the window.
pub fn perf_map_warnings(runtime: Runtime, options: &JvmOptions) -> Vec<String> {
    if runtime != Runtime::Jvm {
        return Vec::new();
    }
    let mut warnings = Vec::new();
    if options.attach_disabled {
        warnings.push(jvm::attach_disabled_warning(options));
    }
    if !options.preserve_frame_pointer {
        warnings.push(jvm::NO_FRAME_POINTER_WARNING.to_string());
    }
    warnings
}

pub use crate::runtime::perf_map::{copy_into_sidecar, perf_map_refused, PERF_MAP_LIMIT};

/// After the window, before perf reads its samples: asks the JVM for its perf map (as the
/// JVM's user, in the target container) and, from a sidecar, copies it to the sidecar's
/// /tmp where its perf looks. Ok: a note for the manifest; Err: a warning (the capture
/// still stands, with JIT frames unnamed). None when there is nothing to ask. Ctrl-C ends
/// this step (the capture goes on without the map).
pub async fn write_jvm_perf_map<R>(
    target: &Target<R>,
    options: &JvmOptions,
    interrupts: &mut Interrupts,
) -> Option<Result<String, String>> {
    if target.runtime != Runtime::Jvm || options.attach_disabled {
        return None;
    }
    tokio::select! {
        done = perf_map_step(target) => Some(done),
        _ = interrupts.next() => Some(Err(
            "the JVM's perf map step was interrupted (Ctrl-C); JIT-compiled Java frames stay unnamed".into(),
        )),
    }
}

async fn perf_map_step<R>(target: &Target<R>) -> Result<String, String> {
    let pid = target.process.pid;
    let container_shell = target.shell.docker().shell(&target.container);
    if let Err(why) = jvm::write_perf_map(&container_shell, pid, &target.process_facts).await {
        return Err(format!(
            "the JVM did not write its perf map (jcmd {pid} Compiler.perfmap: {why}); JIT-compiled Java frames stay unnamed"
        ));
    }
    if target.sidecar.is_some() {
        // The sidecar shares the target's pids but not its /tmp. perf enters the target's
        // mount namespace to read the map when it may (CAP_SYS_ADMIN); with fewer rights
        // it reads the sidecar's own /tmp. The sidecar is devprof's and goes with the
        // capture.
        copy_into_sidecar(&target.shell, pid).await?;
    }
    Ok(format!(
        "JIT frames named from the JVM's perf map (jcmd {pid} Compiler.perfmap at the end of the window)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_only_for_jvms_and_only_for_what_is_missing() {
        let fine = JvmOptions {
            preserve_frame_pointer: true,
            ..Default::default()
        };
        assert!(perf_map_warnings(Runtime::Jvm, &fine).is_empty());
        assert!(perf_map_warnings(Runtime::Native, &JvmOptions::default()).is_empty());
        let bare = perf_map_warnings(Runtime::Jvm, &JvmOptions::default());
        assert_eq!(bare.len(), 1);
        assert!(bare[0].contains("JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer"));
        let closed = JvmOptions {
            preserve_frame_pointer: true,
            attach_disabled: true,
            attach_flag_source: Some("the command line".into()),
        };
        let w = perf_map_warnings(Runtime::Jvm, &closed);
        assert!(w[0].contains("-XX:+DisableAttachMechanism (from the command line)"));
        assert!(w[0].contains("stay unnamed"));
    }
}
