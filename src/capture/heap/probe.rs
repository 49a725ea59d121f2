//! What a process's jemalloc is set up to do, read from every source it has (the binary's
//! compiled-in `malloc_conf`, jemalloc's config-file symlink, the variable, dumps it
//! already wrote) through one exec; texts the process controls come encoded (`wire`).

use super::dumps;
use super::Jemalloc;
use crate::capture::target::Located;
use crate::docker::target::ContainerInfo;
use crate::docker::wire;
use crate::docker::{ContainerShell, Shell};
use crate::error::{Error, Result};
use crate::profile::heap::dumps::{catches, split_prefix, JemallocConf};
use crate::symbols::malloc_conf::{compiled_conf, CompiledConf};
use crate::text::printable;

/// Reads the found process's
/// jemalloc settings from every source it has (see `Enablement`); fails when profiling is
/// not seen on, unless `require_on` is false (`--files`: the user names the dumps).
pub(super) async fn probe_jemalloc(
    located: &Located,
    signal: u32,
    require_on: bool,
) -> Result<Jemalloc> {
    let Located {
        container,
        shell,
        process,
        ..
    } = located;
    let probe = shell.sh(&jemalloc_probe_script(process.pid)).await?;
    let mut facts = JemallocFacts::parse(&probe.stdout);
    if facts.env.is_empty() {
        // A process that rewrote its environment (to show status in `ps`) reads blank
        // here; jemalloc read its settings at start-up, from what the container gave it.
        if let Ok(config) = shell.docker().container_config(&container.id).await {
            if facts.adopt_configured_env(&config.env) {
                crate::note!(
                    "the environment of pid {} reads blank (the process rewrote it); using the jemalloc settings {} was started with",
                    process.pid, container.name
                );
            }
        }
    }
    let (variable, value) = facts.conf();
    let cwd = facts.cwd.clone().unwrap_or_else(|| "/".to_string());
    let mut enablement = Enablement::default();
    if let Some((path, text)) = facts.config_file(&variable) {
        enablement.add(format!("{path} (symlink)"), text);
    }
    if let Some(v) = &value {
        enablement.add(variable.clone(), v.clone());
    }
    // The binary's compiled-in options cost a copy of the binary: read only when the
    // cheaper sources leave profiling off without saying prof:false.
    if !enablement.conf().profiling() && !enablement.says_off() {
        if let Some(compiled) = compiled_conf_of(shell, container, process.pid).await {
            if let Some((symbol, text)) = compiled.early {
                enablement.add_first(format!("the binary's {symbol}"), text);
            }
            if let Some((symbol, text)) = compiled.late {
                enablement.add(format!("the binary's {symbol}"), text);
            }
        }
    }
    let mut conf = enablement.conf();
    let (mut dump_dir, mut dump_base) = split_prefix(conf.prefix(), &cwd);
    if !conf.profiling() && !enablement.says_off() {
        // Dumps this very process wrote prove that its profiling is on, whatever its
        // settings read now.
        let own = dumps::listing_of(shell, &dump_dir, &dump_base)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|d| d.pid == process.pid)
            .count();
        if own > 0 {
            enablement.add(
                format!("{own} dump(s) of pid {} already in {dump_dir}", process.pid),
                "prof:true".to_string(),
            );
            conf = enablement.conf();
            (dump_dir, dump_base) = split_prefix(conf.prefix(), &cwd);
        }
    }
    if !conf.profiling() {
        let mut found = match &value {
            None if facts.uses_jemalloc() => format!("{variable} is not set"),
            None => format!(
                "{variable} is not set, and no jemalloc was found in the program (a program with another allocator has no jemalloc heap profiles)"
            ),
            Some(v) => format!("{variable}={} has no prof:true", printable(v)),
        };
        found.push_str(&format!(
            "; also checked: {}, the binary's malloc_conf, and dumps of pid {} in {}",
            facts.config_file_name(&variable),
            process.pid,
            printable(&dump_dir)
        ));
        let error = Error::HeapProfilingOff {
            container: container.name.clone(),
            pid: process.pid,
            program: process.program().to_string(),
            variable: variable.clone(),
            found,
        };
        if require_on {
            return Err(error);
        }
        crate::note!(
            "jemalloc profiling of pid {} is not visible ({variable} unset, no config file, no compiled-in options, no dumps of its own); rendering the dumps named with --files",
            process.pid
        );
    }
    Ok(Jemalloc {
        catches_signal: facts.sigcgt.as_deref().is_some_and(|m| catches(m, signal)),
        process_started: facts.process_started(),
        conf_variable: printable(&enablement.source_names().unwrap_or(variable)),
        conf_text: printable(&enablement.text()),
        conf,
        dump_dir,
        dump_base,
    })
}

/// The jemalloc options of a process, merged from its sources in jemalloc's own order
/// (the binary's `malloc_conf`, the config file's symlink, the variable; a later option
/// overrides an earlier one), with the name of each source.
#[derive(Debug, Default)]
struct Enablement {
    sources: Vec<(String, String)>,
}

impl Enablement {
    fn add(&mut self, source: String, text: String) {
        if !text.trim().is_empty() {
            self.sources.push((source, text));
        }
    }

    fn add_first(&mut self, source: String, text: String) {
        if !text.trim().is_empty() {
            self.sources.insert(0, (source, text));
        }
    }

    fn text(&self) -> String {
        self.sources
            .iter()
            .map(|(_, t)| t.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn conf(&self) -> JemallocConf {
        JemallocConf::parse(&self.text())
    }

    /// An explicit `prof:false` (no other source can turn it on later).
    fn says_off(&self) -> bool {
        self.conf().options.get("prof").is_some_and(|v| v != "true")
    }

    fn source_names(&self) -> Option<String> {
        (!self.sources.is_empty()).then(|| {
            self.sources
                .iter()
                .map(|(s, _)| s.as_str())
                .collect::<Vec<_>>()
                .join(" + ")
        })
    }
}

/// The jemalloc options compiled into the process's binary, read from a copy taken out of
/// the container into a private temporary directory (bounded like every copy-out); None
/// when the binary cannot be had.
async fn compiled_conf_of(
    shell: &Shell,
    container: &ContainerInfo,
    pid: u32,
) -> Option<CompiledConf> {
    let exe = crate::docker::binary::resolve(shell, &format!("/proc/{pid}/exe"))
        .await
        .ok()
        .filter(|p| p.starts_with('/') && !p.starts_with("/proc/"))?;
    crate::docker::binary::with_copy(shell.docker(), &container.name, &exe, |local| {
        compiled_conf(local)
    })
    .await
    .ok()
}

/// Prints `env`, `cwd`, `sigcgt`, `reads` (the variable the program's jemalloc reads,
/// found in its binary), `lib` and `conffile` (jemalloc's config-file symlinks, read in
/// the process's own root) records for `pid`; texts the process controls are encoded
/// (`wire`).
fn jemalloc_probe_script(pid: u32) -> String {
    let env = wire::env_records(
        "$p",
        &[
            "_RJEM_MALLOC_CONF=*".to_string(),
            "MALLOC_CONF=*".to_string(),
        ],
    );
    let name = wire::NAME_LIMIT;
    format!(
        r#"{prelude}p={pid}
{env}printf 'cwd\t'; {{ readlink /proc/$p/cwd 2>/dev/null; }} | enc {name}; echo
{{ while read -r k v _; do [ "$k" = SigCgt: ] && printf 'sigcgt\t%s\n' "$v"; done < /proc/$p/status; }} 2>/dev/null
{{ while read -r _ _ _ _ _ f; do case "$f" in *jemalloc*) printf 'lib\t'; printf '%s' "$f" | enc {name}; echo;; esac; done < /proc/$p/maps; }} 2>/dev/null
if command -v grep >/dev/null 2>&1; then
  if grep -q -a _RJEM_MALLOC_CONF /proc/$p/exe 2>/dev/null; then printf 'reads\t_RJEM_MALLOC_CONF\n'
  elif grep -q -a MALLOC_CONF /proc/$p/exe 2>/dev/null; then printf 'reads\tMALLOC_CONF\n'
  fi
fi
read -r line < /proc/$p/stat && rest=${{line##*) }} && set -- $rest && printf 'starttime\t%s\n' "${{20}}"
while read -r k v _; do [ "$k" = btime ] && printf 'btime\t%s\n' "$v"; done < /proc/stat
printf 'clktck\t%s\n' "$(getconf CLK_TCK 2>/dev/null)"
for f in /etc/malloc.conf /etc/_rjem_malloc.conf; do
  t=$(readlink "/proc/$p/root$f" 2>/dev/null) && {{ printf 'conffile\t%s\t' "$f"; printf '%s' "$t" | enc {name}; echo; }}
done
"#,
        prelude = wire::PRELUDE,
    )
}

/// jemalloc's config-file symlinks the probe reads.
const CONFIG_FILES: [&str; 2] = ["/etc/malloc.conf", "/etc/_rjem_malloc.conf"];

#[derive(Debug, Default, PartialEq)]
struct JemallocFacts {
    env: Vec<(String, String)>,
    cwd: Option<String>,
    sigcgt: Option<String>,
    reads: Option<String>,
    jemalloc_libs: Vec<String>,
    /// `/etc/[_rjem_]malloc.conf` symlinks in the process's root, with their targets.
    config_files: Vec<(String, String)>,
    /// The process's start in clock ticks after boot, the boot time (epoch seconds) and
    /// the clock tick rate.
    starttime: Option<u64>,
    btime: Option<i64>,
    clktck: Option<u64>,
}

impl JemallocFacts {
    /// The process's start, seconds since the epoch (rounded down: a dump written in the
    /// same second still counts as the process's own).
    fn process_started(&self) -> Option<i64> {
        let ticks = self.clktck.filter(|t| *t > 0).unwrap_or(100);
        Some(self.btime? + (self.starttime? / ticks) as i64)
    }

    fn parse(text: &str) -> Self {
        let mut f = JemallocFacts::default();
        let mut once = wire::Once::default();
        let text_field = |r: &wire::Record<'_>, i: usize| {
            r.text(i)
                .map(|t| t.strip_suffix('\n').unwrap_or(&t).to_string())
        };
        for r in wire::records(text) {
            match r.key {
                "env" => {
                    let entry = r.text(0);
                    if let Some((name, value)) = entry.as_deref().and_then(|e| e.split_once('=')) {
                        if f.env.iter().all(|(n, _)| n != name) {
                            f.env.push((name.to_string(), value.to_string()));
                        }
                    }
                }
                "lib" => f.jemalloc_libs.extend(text_field(&r, 0)),
                "conffile" => {
                    let path = r.raw(0).filter(|p| CONFIG_FILES.contains(p));
                    if let (Some(path), Some(target)) = (path, r.text(1)) {
                        if once.first(path) {
                            f.config_files.push((path.to_string(), target));
                        }
                    }
                }
                key if !once.first(key) => {}
                "cwd" => f.cwd = text_field(&r, 0).filter(|c| c.starts_with('/')),
                "sigcgt" => {
                    f.sigcgt = r
                        .raw(0)
                        .filter(|m| wire::mask(m).is_some())
                        .map(String::from)
                }
                "reads" => {
                    f.reads = r
                        .raw(0)
                        .filter(|v| ["_RJEM_MALLOC_CONF", "MALLOC_CONF"].contains(v))
                        .map(String::from)
                }
                "starttime" => f.starttime = r.number(0),
                "btime" => f.btime = r.number(0),
                "clktck" => f.clktck = r.number(0),
                _ => {}
            }
        }
        f
    }

    /// Takes the jemalloc variables from the container's configured environment (`K=V`
    /// entries); true when one was found.
    fn adopt_configured_env(&mut self, configured: &[String]) -> bool {
        for entry in configured {
            if let Some((name, value)) = entry.split_once('=') {
                if name == "_RJEM_MALLOC_CONF" || name == "MALLOC_CONF" {
                    self.env.push((name.to_string(), value.to_string()));
                }
            }
        }
        !self.env.is_empty()
    }

    /// The config file a jemalloc reading `variable` looks at: the prefix of the variable
    /// names the file (`_RJEM_MALLOC_CONF` -> `/etc/_rjem_malloc.conf`).
    fn config_file_name(&self, variable: &str) -> &'static str {
        match variable {
            "_RJEM_MALLOC_CONF" => "/etc/_rjem_malloc.conf",
            "MALLOC_CONF" => "/etc/malloc.conf",
            _ => "/etc/_rjem_malloc.conf or /etc/malloc.conf",
        }
    }

    /// The config file's symlink target, when the file this jemalloc reads is there.
    fn config_file(&self, variable: &str) -> Option<(String, String)> {
        let wanted = self.config_file_name(variable);
        self.config_files
            .iter()
            .find(|(path, _)| wanted.split(" or ").any(|w| w == path))
            .cloned()
    }

    fn uses_jemalloc(&self) -> bool {
        self.reads.is_some() || !self.jemalloc_libs.is_empty()
    }

    /// The variable this program's jemalloc reads and its value: the one found in the
    /// binary; else a set one (prefixed first); else `MALLOC_CONF` (unprefixed builds).
    fn conf(&self) -> (String, Option<String>) {
        let value_of = |name: &str| {
            self.env
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let variable = match &self.reads {
            Some(v) => v.clone(),
            None if !self.jemalloc_libs.is_empty() => "MALLOC_CONF".to_string(),
            None => ["_RJEM_MALLOC_CONF", "MALLOC_CONF"]
                .into_iter()
                .find(|n| value_of(n).is_some_and(|v| JemallocConf::parse(&v).profiling()))
                .or_else(|| {
                    ["_RJEM_MALLOC_CONF", "MALLOC_CONF"]
                        .into_iter()
                        .find(|n| value_of(n).is_some())
                })
                .unwrap_or(
                    "_RJEM_MALLOC_CONF (tikv-jemallocator) or MALLOC_CONF (unprefixed jemalloc)",
                )
                .to_string(),
        };
        let value = value_of(&variable);
        (variable, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Probe lines as the script prints them: the texts the process controls encoded.
    fn probe(lines: &str) -> JemallocFacts {
        let text: String = lines
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                match f[0] {
                    "env" | "cwd" | "lib" => {
                        format!("{}\t{}\n", f[0], wire::encode(f[1].as_bytes()))
                    }
                    "conffile" => {
                        format!("conffile\t{}\t{}\n", f[1], wire::encode(f[2].as_bytes()))
                    }
                    _ => format!("{l}\n"),
                }
            })
            .collect();
        JemallocFacts::parse(&text)
    }

    #[test]
    fn the_process_start_comes_from_boot_time_and_start_ticks() {
        // demo-seq's probe: started 123456 ticks (100 Hz) after a boot at 1795000000.
        let f = probe("starttime\t123456\nbtime\t1795000000\nclktck\t100\n");
        assert_eq!(f.process_started(), Some(1_795_001_234));
        // getconf missing: Linux's USER_HZ of 100.
        let f = probe("starttime\t123456\nbtime\t1795000000\nclktck\t\n");
        assert_eq!(f.process_started(), Some(1_795_001_234));
        // /proc/<pid>/stat unreadable: no start, and no dump is ever left out for it.
        assert_eq!(probe("btime\t1795000000\n").process_started(), None);
    }

    #[test]
    fn a_blank_environment_falls_back_to_the_configured_one() {
        let mut facts = probe("cwd\t/\nreads\t_RJEM_MALLOC_CONF\n");
        assert_eq!(facts.conf().1, None);
        let configured = [
            "PATH=/usr/bin".to_string(),
            "_RJEM_MALLOC_CONF=prof:true,prof_prefix:/profiling/jeprof.x".to_string(),
        ];
        assert!(facts.adopt_configured_env(&configured));
        let (variable, value) = facts.conf();
        assert_eq!(variable, "_RJEM_MALLOC_CONF");
        assert!(JemallocConf::parse(&value.unwrap()).profiling());
        let mut none = JemallocFacts::default();
        assert!(!none.adopt_configured_env(&["PATH=/usr/bin".to_string()]));
    }

    #[test]
    fn sources_merge_in_jemallocs_order_and_the_config_file_matches_the_prefix() {
        let f = probe(
            "reads\t_RJEM_MALLOC_CONF\nconffile\t/etc/malloc.conf\tprof:false\n\
             conffile\t/etc/_rjem_malloc.conf\tprof:true,prof_prefix:/tmp/jeprof\n",
        );
        // The prefixed jemalloc reads its own file, not the unprefixed one.
        let (path, text) = f.config_file("_RJEM_MALLOC_CONF").unwrap();
        assert_eq!(path, "/etc/_rjem_malloc.conf");
        assert_eq!(text, "prof:true,prof_prefix:/tmp/jeprof");
        assert_eq!(f.config_file("MALLOC_CONF").unwrap().1, "prof:false");

        let mut e = Enablement::default();
        e.add(format!("{path} (symlink)"), text);
        e.add("_RJEM_MALLOC_CONF".into(), "lg_prof_sample:17".into());
        e.add_first(
            "the binary's _rjem_malloc_conf".into(),
            "prof:false,prof_prefix:/x".into(),
        );
        let conf = e.conf();
        assert!(
            conf.profiling(),
            "the file overrides the compiled-in prof:false"
        );
        assert_eq!(conf.prefix(), "/tmp/jeprof");
        assert_eq!(conf.lg_sample(), 17);
        assert!(!e.says_off());
        assert_eq!(
            e.source_names().unwrap(),
            "the binary's _rjem_malloc_conf + /etc/_rjem_malloc.conf (symlink) + _RJEM_MALLOC_CONF"
        );
        // The variable, read last, can turn it off again.
        e.add("_RJEM_MALLOC_CONF".into(), "prof:false".into());
        assert!(!e.conf().profiling() && e.says_off());
        assert_eq!(Enablement::default().source_names(), None);
    }

    #[test]
    fn probe_facts_name_the_variable_the_program_reads() {
        let f = probe(
            "env\t_RJEM_MALLOC_CONF=prof:true,prof_prefix:/profiling/jeprof.x\nenv\tMALLOC_CONF=prof:false\n\
             cwd\t/\nsigcgt\t0000000100004c42\nreads\t_RJEM_MALLOC_CONF\n",
        );
        assert_eq!(
            f.conf(),
            (
                "_RJEM_MALLOC_CONF".into(),
                Some("prof:true,prof_prefix:/profiling/jeprof.x".into())
            )
        );
        assert!(f.uses_jemalloc());
        assert!(catches(f.sigcgt.as_deref().unwrap(), 12));

        // Unprefixed jemalloc as a shared library: MALLOC_CONF, unset.
        let g = probe("lib\t/usr/lib/x86_64-linux-gnu/libjemalloc.so.2\ncwd\t/srv\n");
        assert_eq!(g.conf(), ("MALLOC_CONF".into(), None));

        // No grep in the image, nothing set: both names are offered.
        let h = probe("cwd\t/\n");
        assert!(h.conf().0.contains("_RJEM_MALLOC_CONF") && h.conf().0.contains("MALLOC_CONF"));
        assert!(!h.uses_jemalloc());
    }

    #[test]
    fn heap_probe_cwd_or_env_with_newlines_cannot_add_a_setting() {
        // A working directory named to look like a second environment entry.
        let text = format!(
            "cwd\t{}\nenv\t{}\nreads\t_RJEM_MALLOC_CONF\nreads\tMALLOC_CONF\nconffile\t/tmp/x\t{}\n",
            wire::encode(b"/srv\nenv\t_RJEM_MALLOC_CONF=prof:true,prof_prefix:/etc/x\n"),
            wire::encode(b"MALLOC_CONF=prof:false\n_RJEM_MALLOC_CONF=prof:true"),
            wire::encode(b"prof:true"),
        );
        let f = JemallocFacts::parse(&text);
        assert_eq!(
            f.cwd.as_deref(),
            Some("/srv\nenv\t_RJEM_MALLOC_CONF=prof:true,prof_prefix:/etc/x")
        );
        assert_eq!(f.env.len(), 1);
        assert_eq!(
            f.reads.as_deref(),
            Some("_RJEM_MALLOC_CONF"),
            "the first stands"
        );
        assert!(f.config_files.is_empty(), "only jemalloc's own files");
        assert_eq!(
            f.conf().1,
            None,
            "the program reads _RJEM_MALLOC_CONF, which is not set"
        );
    }
}
