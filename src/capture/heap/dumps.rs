//! Which dumps a heap capture uses, and bringing them home: listing the process's dumps in
//! the container, choosing among those already written, asking for fresh ones over a
//! window (`window.rs`: the dump signal, interval dumps), and copying them out through the
//! archive API.

use super::{HeapTarget, Obtained};
use crate::docker::archive::CopyLimit;
use crate::docker::wire;
use crate::docker::{ContainerShell, Shell};
use crate::error::{Error, Result};
use crate::profile::heap::dumps::{listed, select, DumpFile, SelectError, Selection};
use crate::text::quote;
use chrono::Local;
use std::path::{Path, PathBuf};

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
    listing_of(
        &target.shell,
        &target.ready.dump_dir,
        &target.ready.dump_base,
    )
    .await
}

/// The listing without the dumps an earlier process of the same pid left behind (a
/// restarted container often gets its old pid back, and its dumps stay on a volume): they
/// are older than the process. Waiting for a fresh dump must never count them.
pub(super) async fn dumps_since_process_start(target: &HeapTarget) -> Result<Vec<DumpFile>> {
    let mut all = list_dumps(target).await?;
    if let Some(started) = target.ready.process_started {
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
            dir: target.ready.shown_dir(),
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
            dir: target.ready.shown_dir(),
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
        recording: None,
    })
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
    let source = dump.path.clone().unwrap_or_else(|| {
        format!(
            "{}/{}",
            target.ready.dump_dir.trim_end_matches('/'),
            dump.name
        )
    });
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
            dir: target.ready.shown_dir(),
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
