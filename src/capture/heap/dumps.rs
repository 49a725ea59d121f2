//! Which dumps a heap capture uses, and bringing them home: listing the process's dumps in
//! the container, choosing among those already written, asking for fresh ones over a
//! window (the dump signal, interval dumps), and copying them out through the archive API.

use super::{HeapTarget, Obtained, DUMP_WAIT, POLL};
use crate::docker::archive::CopyLimit;
use crate::docker::wire;
use crate::docker::{ContainerShell, Shell};
use crate::error::{Error, Result};
use crate::profile::heap::dumps::{
    listed, select, DumpFile, DumpKind, SelectError, Selection, Signal,
};
use crate::signals::Interrupts;
use crate::text::quote;
use crate::ui::progress;
use chrono::Local;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Lists `<dir>/<base>.*.heap` with sizes and modification times: `dump<TAB>name<TAB>size
/// <TAB>mtime` records, the name encoded (`wire`: any user of the container may name a
/// file there).
pub(super) fn listing_script(dir: &str, base: &str) -> String {
    format!(
        r#"{prelude}cd {dir} 2>/dev/null || {{ echo "nodir"; exit 0; }}
for f in {base}.*.heap; do
  [ -f "$f" ] || continue
  s=$(stat -c '%s %Y' -- "$f" 2>/dev/null) || s="$(wc -c < "$f") 0"
  printf 'dump\t'; printf '%s' "$f" | enc {name}; printf '\t%s\t%s\n' "${{s% *}}" "${{s#* }}"
done
"#,
        prelude = wire::PRELUDE,
        dir = quote(dir),
        base = quote(base),
        name = wire::NAME_LIMIT,
    )
}

/// The dumps in the listing script's output: names decoded, sizes and times strict.
pub(super) fn read_listing(base: &str, text: &str) -> Vec<DumpFile> {
    let entries = wire::records(text)
        .filter(|r| r.key == "dump")
        .filter_map(|r| {
            let name = String::from_utf8(r.bytes(0)?).ok()?;
            Some((name, r.number(1)?, r.number(2)?))
        });
    listed(base, entries)
}

pub(super) async fn list_dumps(target: &HeapTarget) -> Result<Vec<DumpFile>> {
    listing_of(&target.shell, &target.dump_dir, &target.dump_base).await
}

/// The listing without the dumps an earlier process of the same pid left behind (a
/// restarted container often gets its old pid back, and its dumps stay on a volume): they
/// are older than the process. Waiting for a fresh dump must never count them.
async fn dumps_since_process_start(target: &HeapTarget) -> Result<Vec<DumpFile>> {
    let mut all = list_dumps(target).await?;
    if let Some(started) = target.process_started {
        all.retain(|d| d.pid != target.process.pid || d.mtime <= 0 || d.mtime >= started);
    }
    Ok(all)
}

/// The dumps named `<base>.*.heap` in `dir` of the container `shell` runs in.
pub(super) async fn listing_of(shell: &Shell, dir: &str, base: &str) -> Result<Vec<DumpFile>> {
    let out = shell.sh(&listing_script(dir, base)).await?;
    if out.stdout.trim() == "nodir" {
        return Ok(Vec::new());
    }
    Ok(read_listing(base, &out.stdout))
}

/// Dump files the user named by their path in the container: any file, whatever its name
/// (a name jemalloc would write gives its pid and sequence).
async fn named_paths(target: &HeapTarget, paths: &[String]) -> Result<Vec<DumpFile>> {
    let script: String = paths
        .iter()
        .map(|p| {
            format!(
                "printf 'file\\t%s\\n' \"$(stat -L -c '%s %Y %F' -- {} 2>/dev/null)\"\n",
                quote(p)
            )
        })
        .collect();
    let out = target.shell.sh(&script).await?;
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("file\t"))
        .collect();
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let mut f = lines.get(i).copied().unwrap_or("").splitn(3, ' ');
        let size = f.next().and_then(|v| v.parse::<u64>().ok());
        let mtime = f.next().and_then(|v| v.parse::<i64>().ok());
        let regular = f.next().is_some_and(|k| k.starts_with("regular"));
        match (size, mtime, regular) {
            (Some(size), Some(mtime), true) => found.push(DumpFile::at_path(path, size, mtime)),
            _ => missing.push(path.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(Error::HeapNoDumps {
            container: target.container.name.clone(),
            what: format!("no regular file at {}", missing.join(", ")),
            dir: target.dump_dir.clone(),
            hint: "give paths as the process sees them in its container".into(),
        });
    }
    Ok(found)
}

pub(super) fn dump_names(dumps: &[DumpFile]) -> Vec<String> {
    dumps
        .iter()
        .map(|d| {
            format!(
                "{} (pid {}, seq {}, {}, {})",
                d.name,
                d.pid,
                d.seq,
                d.kind.describe(),
                local_time(d.mtime)
            )
        })
        .collect()
}

pub(super) fn local_time(mtime: i64) -> String {
    chrono::DateTime::from_timestamp(mtime, 0)
        .map(|t| {
            t.with_timezone(&Local)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|| mtime.to_string())
}

pub(super) async fn existing_dumps(target: &HeapTarget, selection: &Selection) -> Result<Obtained> {
    // --latest, --last and --all-dumps mean this process's dumps, never those an earlier
    // process of the same pid left on a volume; --files takes whatever the user names.
    let mut all = match selection {
        Selection::Files(_) => list_dumps(target).await?,
        _ => dumps_since_process_start(target).await?,
    };
    if let Selection::Files(names) = selection {
        let paths: Vec<String> = names
            .iter()
            .filter(|n| n.starts_with('/'))
            .cloned()
            .collect();
        if !paths.is_empty() {
            all.extend(named_paths(target, &paths).await?);
        }
    }
    let pid = target.process.pid;
    let own: Vec<DumpFile> = all.iter().filter(|d| d.pid == pid).cloned().collect();
    let listing = |dumps: &[DumpFile]| -> String {
        if dumps.is_empty() {
            "there are none".to_string()
        } else {
            format!(
                "dumps there, oldest first:\n{}",
                dump_names(dumps)
                    .iter()
                    .map(|n| format!("    - {n}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        }
    };
    let make_one = format!(
        "make one with `devprof heap {} 10` (asks the process for fresh dumps)",
        target.container.name
    );
    let merged = select(&all, pid, selection).map_err(|e| {
        let (what, hint) = match e {
            SelectError::NoDumps => (
                format!("process {pid} has written no heap dump yet"),
                format!("{make_one}; {}", listing(&all)),
            ),
            SelectError::TooFew { wanted, have } => (
                format!(
                    "--last {wanted}: process {pid} has written only {have} dump{}",
                    if have == 1 { "" } else { "s" }
                ),
                format!("{}; {make_one}", listing(&own)),
            ),
            SelectError::Missing(names) => {
                (format!("no dump named {}", names.join(", ")), listing(&all))
            }
        };
        Error::HeapNoDumps {
            container: target.container.name.clone(),
            what,
            dir: target.dump_dir.clone(),
            hint,
        }
    })?;
    let how = match selection {
        Selection::Latest => "--latest: the newest dump the process wrote".to_string(),
        Selection::All => format!("--all-dumps: every dump of the process ({})", merged.len()),
        Selection::Last(n) => format!("--last {n}: the newest {n} dumps of the process"),
        Selection::Files(names) => format!(
            "--files: {} named dump{}",
            names.len(),
            if names.len() == 1 { "" } else { "s" }
        ),
    };
    Ok(Obtained {
        collected: merged.clone(),
        merged,
        how,
        window: None,
        interrupted: false,
        instants: None,
    })
}

/// Over the window: the signal at the start and the end (when the process catches it),
/// interval dumps meanwhile. The newest fresh dump is rendered; all are collected.
pub(super) async fn fresh_dumps(
    target: &HeapTarget,
    window: Duration,
    signal: &Signal,
    interrupts: &mut Interrupts,
) -> Result<Obtained> {
    let signal_name = signal.name.as_str();
    let pid = target.process.pid;
    let interval = target.conf.lg_interval();
    if !target.catches_signal && interval.is_none() {
        return Err(Error::HeapDumpUnavailable {
            container: target.container.name.clone(),
            pid,
            detail: format!(
                "it does not catch SIG{signal_name} (sending it would kill it) and interval dumps are off (no lg_prof_interval in {})",
                target.conf_variable
            ),
            hint: format!(
                "either have the program call jemalloc's prof.dump on SIG{signal_name} (DEVPROF_HEAP_DUMP_SIGNAL names another signal), \
                 or add lg_prof_interval:N to {} (a dump per 2^N allocated bytes; restart needed), \
                 or render dumps it already wrote: `devprof heap {} --latest`",
                target.conf_variable, target.container.name
            ),
        });
    }
    let before = dumps_since_process_start(target).await?;
    let mut last_seq = before.iter().filter(|d| d.pid == pid).map(|d| d.seq).max();
    let label = format!("heap dumps of {} (pid {pid})", target.container.name);
    // In a session, the start dump is asked for when the recorders start: the gate's
    // opening plus the lead they are released at.
    tokio::select! {
        _ = crate::capture::armed_stop::released() => {}
        _ = interrupts.next() => return Err(Error::Interrupted),
    }
    // The window runs from the start signal to the end signal: the process dumps as it
    // handles each, however long the dump then takes to land.
    let started = Instant::now();
    let started_at = chrono::Local::now();
    let bar = progress::capture_bar(window, &label);
    if bar.is_hidden() {
        progress::note(
            None,
            &format!(
                "{label}: {} window started",
                crate::units::human_duration(window)
            ),
        );
    }
    if target.catches_signal {
        bar.set_message(format!("SIG{signal_name}: dump at the start"));
        let first = request_dump(target, signal, last_seq).await;
        match first {
            Ok(d) => last_seq = Some(d.seq),
            Err(e) => {
                bar.finish_and_clear();
                return Err(e);
            }
        }
    }
    bar.set_message(match (target.catches_signal, interval) {
        (true, Some(n)) => format!("interval dumps every 2^{n} bytes; SIG{signal_name} at the end"),
        (true, None) => format!("SIG{signal_name} at the end"),
        (false, Some(n)) => format!("interval dumps every 2^{n} bytes"),
        (false, None) => unreachable!("checked above"),
    });
    let mut interrupted = false;
    loop {
        let elapsed = started.elapsed();
        if elapsed >= window {
            break;
        }
        tokio::select! {
            _ = interrupts.next() => {
                interrupted = true;
                bar.set_message("Ctrl-C: ending the window (again aborts)");
                break;
            }
            _ = tokio::time::sleep(Duration::from_millis(100).min(window - elapsed)) => {
                let tenths = (started.elapsed().as_millis() / 100) as u64;
                bar.set_position(tenths.min(bar.length().unwrap_or(tenths)));
            }
        }
    }
    let recorded = started.elapsed().min(window);
    if interrupts.pending() {
        bar.abandon_with_message("aborted");
        return Err(Error::Interrupted);
    }
    let stopped_at = chrono::Local::now();
    if target.catches_signal {
        bar.set_message(format!("SIG{signal_name}: dump at the end"));
        let now = dumps_since_process_start(target).await?;
        let seq = now
            .iter()
            .filter(|d| d.pid == pid)
            .map(|d| d.seq)
            .max()
            .max(last_seq);
        if let Err(e) = request_dump(target, signal, seq).await {
            bar.finish_and_clear();
            return Err(e);
        }
    }
    bar.finish_and_clear();
    let before_max = before.iter().filter(|d| d.pid == pid).map(|d| d.seq).max();
    let after = dumps_since_process_start(target).await?;
    let fresh: Vec<DumpFile> = after
        .into_iter()
        .filter(|d| d.pid == pid && before_max.is_none_or(|m| d.seq > m))
        .collect();
    let Some(newest) = fresh.last().cloned() else {
        return Err(Error::HeapDumpUnavailable {
            container: target.container.name.clone(),
            pid,
            detail: format!(
                "no interval dump was written in the {:.0} s window (one comes every 2^{} allocated bytes)",
                recorded.as_secs_f64(),
                interval.unwrap_or(0)
            ),
            hint: "lengthen the window or lower lg_prof_interval, or have the program call prof.dump on a signal".into(),
        });
    };
    let intervals = fresh
        .iter()
        .filter(|d| matches!(d.kind, DumpKind::Interval(_)))
        .count();
    let how = match (target.catches_signal, intervals) {
        (true, 0) => format!("SIG{signal_name} at the start and the end of the window (the program calls prof.dump); the end dump is rendered"),
        (true, n) => format!("SIG{signal_name} at the start and the end of the window, and {n} interval dumps; the end dump is rendered"),
        (false, n) => format!("{n} interval dumps written in the window (lg_prof_interval); the newest is rendered"),
    };
    Ok(Obtained {
        collected: fresh,
        merged: vec![newest],
        how,
        window: Some(recorded),
        interrupted,
        instants: Some((started_at, stopped_at)),
    })
}

/// Sends the dump signal and waits for a new dump (sequence above `after_seq`) to appear
/// and stop growing.
pub(super) async fn request_dump(
    target: &HeapTarget,
    signal: &Signal,
    after_seq: Option<u64>,
) -> Result<DumpFile> {
    let signal_name = signal.name.as_str();
    let pid = target.process.pid;
    let unavailable = |detail: String| {
        Error::HeapDumpUnavailable {
        container: target.container.name.clone(),
        pid,
        detail,
        hint: format!(
            "check that the process may write to {} (prof_prefix in {}), and that the program calls jemalloc's \
             prof.dump on SIG{signal_name}; its log may say why (`docker logs {}`)",
            target.dump_dir, target.conf_variable, target.container.name
        ),
    }
    };
    let sent = target
        .shell
        .run(&["kill", &format!("-{}", signal.number), &pid.to_string()])
        .await?;
    if !sent.success() {
        return Err(unavailable(format!(
            "kill -{} {pid} failed: {}",
            signal.number,
            sent.stderr.trim()
        )));
    }
    let deadline = Instant::now() + DUMP_WAIT;
    let mut seen: Option<DumpFile> = None;
    loop {
        tokio::time::sleep(POLL).await;
        let newest = dumps_since_process_start(target)
            .await?
            .into_iter()
            .filter(|d| d.pid == pid && after_seq.is_none_or(|s| d.seq > s))
            .max_by_key(|d| d.seq);
        match (newest, &seen) {
            // Settled: the same file, the same size, twice in a row.
            (Some(d), Some(prev)) if d.name == prev.name && d.size == prev.size && d.size > 0 => {
                return Ok(d)
            }
            (Some(d), _) => seen = Some(d),
            (None, _) => {}
        }
        if Instant::now() > deadline {
            return Err(unavailable(format!(
                "no new dump appeared in {} within {} s of SIG{signal_name}",
                target.dump_dir,
                DUMP_WAIT.as_secs()
            )));
        }
    }
}

/// Brings one dump home under its own name (a copy already there with the same size is
/// the same dump and is reused). Should a different file hold the name (the process was
/// restarted with the same pid and counted again from 0), the new copy gets the dump's
/// time in its name. Returns the local name and whether it was downloaded now.
pub(super) async fn fetch_dump(
    target: &HeapTarget,
    dump: &DumpFile,
    dir: &Path,
) -> Result<(String, bool)> {
    let mut local = dump.name.clone();
    let existing = dir.join(&local);
    if let Ok(meta) = std::fs::symlink_metadata(&existing) {
        if meta.is_file() && meta.len() == dump.size {
            return Ok((local, false));
        }
        local = format!(
            "{}.t{}.heap",
            dump.name.trim_end_matches(".heap"),
            dump.mtime
        );
        if std::fs::symlink_metadata(dir.join(&local))
            .is_ok_and(|m| m.is_file() && m.len() == dump.size)
        {
            return Ok((local, false));
        }
    }
    let source = dump
        .path
        .clone()
        .unwrap_or_else(|| format!("{}/{}", target.dump_dir.trim_end_matches('/'), dump.name));
    let entry = PathBuf::from(&dump.name);
    let new_name = PathBuf::from(&local);
    target
        .shell
        .docker()
        .download(
            &target.container.name,
            &source,
            dir,
            CopyLimit::HEAP_DUMP,
            move |e| (e == entry).then(|| new_name.clone()),
        )
        .await?;
    if !dir.join(&local).is_file() {
        return Err(Error::HeapNoDumps {
            container: target.container.name.clone(),
            what: format!("dump {} disappeared before it could be copied", dump.name),
            dir: target.dump_dir.clone(),
            hint: "something removed it meanwhile; run again".into(),
        });
    }
    Ok((local, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The listing script, run by this host's sh in a directory with a dump whose name
    /// holds a newline and a forged record, and a real dump.
    #[test]
    fn heap_dump_name_with_a_newline_cannot_add_a_listing_record() {
        let dir = tempfile::tempdir().unwrap();
        let forged = "jeprof.x\ndump\tjeprof.1.0.f.heap\t1\t1\n.heap";
        std::fs::write(dir.path().join(forged), b"x").unwrap();
        std::fs::write(dir.path().join("jeprof.7.1.m1.heap"), b"heap").unwrap();
        let script = listing_script(&dir.path().to_string_lossy(), "jeprof");
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let dumps = read_listing("jeprof", &text);
        let names: Vec<&str> = dumps.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["jeprof.7.1.m1.heap"], "{text}");
        assert_eq!(dumps[0].size, 4);
    }
}
