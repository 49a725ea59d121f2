//! Compose files, read and never written: `.env` files, `${VAR}` interpolation as
//! docker-compose does it, the services with their images and profiling-relevant
//! settings, and the override file that gives chosen services what profiling needs.
//! Pure: text in, text out; the engine lookups (which images are profiling images, whether
//! the engine knows CAP_PERFMON) are made by the caller.

use serde_yaml::{Mapping, Value};
use std::collections::BTreeMap;

/// Reads a `.env` file as docker-compose does: `KEY=VALUE` lines, `#` comments, an
/// optional `export `, values in single quotes taken literally, in double quotes with
/// `\n` escapes, unquoted ones up to an inline ` #` comment.
pub fn parse_env_file(text: &str) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            continue;
        }
        let value = value.trim();
        let value = if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\''))
        {
            inner.to_string()
        } else if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            inner.replace("\\n", "\n").replace("\\\"", "\"")
        } else {
            match value.find(" #") {
                Some(i) => value[..i].trim_end().to_string(),
                None => value.to_string(),
            }
        };
        vars.insert(key.to_string(), value);
    }
    vars
}

/// Interpolates `$VAR`, `${VAR}`, `${VAR:-default}` (unset or empty), `${VAR-default}`
/// (unset), `${VAR:?message}` / `${VAR?message}` (an error) and `$$` (a literal `$`).
/// An unset variable without a default becomes the empty string, as in docker-compose
/// (which warns).
pub fn interpolate(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| format!("unclosed '${{' in \"{text}\""))?;
            let expr = &body[..end];
            out.push_str(&substitute(expr, lookup).map_err(|e| format!("{e} (in \"{text}\")"))?);
            rest = &body[end + 1..];
        } else {
            let name_len = after
                .char_indices()
                .find(|(j, c)| {
                    !(c.is_ascii_alphanumeric() || *c == '_') || (*j == 0 && c.is_ascii_digit())
                })
                .map(|(j, _)| j)
                .unwrap_or(after.len());
            if name_len == 0 {
                return Err(format!("invalid interpolation: a '$' not followed by a name in \"{text}\" (write $$ for a literal $)"));
            }
            out.push_str(&lookup(&after[..name_len]).unwrap_or_default());
            rest = &after[name_len..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn substitute(expr: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let name_end = expr
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(expr.len());
    let (name, op) = expr.split_at(name_end);
    if name.is_empty() {
        return Err(format!("invalid interpolation '${{{expr}}}'"));
    }
    let value = lookup(name);
    let set_nonempty = value.as_deref().is_some_and(|v| !v.is_empty());
    Ok(match op {
        "" => value.unwrap_or_default(),
        _ if op.starts_with(":-") => {
            if set_nonempty {
                value.unwrap_or_default()
            } else {
                op[2..].to_string()
            }
        }
        _ if op.starts_with('-') => value.unwrap_or_else(|| op[1..].to_string()),
        _ if op.starts_with(":?") => {
            if set_nonempty {
                value.unwrap_or_default()
            } else {
                return Err(format!(
                    "required variable {name} is missing a value: {}",
                    &op[2..]
                ));
            }
        }
        _ if op.starts_with('?') => match value {
            Some(v) => v,
            None => {
                return Err(format!(
                    "required variable {name} is missing a value: {}",
                    &op[1..]
                ))
            }
        },
        _ => return Err(format!("invalid interpolation '${{{expr}}}'")),
    })
}

fn interpolate_tree(
    value: &mut Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    match value {
        Value::String(s) => *s = interpolate(s, lookup)?,
        Value::Sequence(items) => {
            for item in items {
                interpolate_tree(item, lookup)?;
            }
        }
        Value::Mapping(map) => {
            for (_, v) in map.iter_mut() {
                interpolate_tree(v, lookup)?;
            }
        }
        Value::Tagged(tagged) => interpolate_tree(&mut tagged.value, lookup)?,
        _ => {}
    }
    Ok(())
}

/// What devprof needs to know of one service.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Service {
    pub name: String,
    pub image: Option<String>,
    pub has_build: bool,
    pub cap_add: Vec<String>,
    pub security_opt: Vec<String>,
    pub privileged: bool,
    /// Container paths of its volumes.
    pub mount_targets: Vec<String>,
    pub environment: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ComposeFile {
    pub version: Option<String>,
    pub services: Vec<Service>,
    pub volumes: Vec<String>,
}

fn as_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Sequence(items)) => items.iter().filter_map(as_string).collect(),
        Some(other) => as_string(other).into_iter().collect(),
        None => Vec::new(),
    }
}

/// The container path of a volume entry: short syntax `src:dst[:mode]` or `dst`, or the
/// long syntax's `target`.
fn mount_target(volume: &Value) -> Option<String> {
    match volume {
        Value::String(s) => {
            let parts: Vec<&str> = s.split(':').collect();
            match parts.as_slice() {
                [only] => Some(only.to_string()),
                [_, dst] => Some(dst.to_string()),
                [_, dst, _mode] => Some(dst.to_string()),
                _ => None,
            }
        }
        Value::Mapping(m) => m.get("target").and_then(as_string),
        _ => None,
    }
}

fn environment(v: Option<&Value>) -> BTreeMap<String, String> {
    match v {
        Some(Value::Mapping(m)) => m
            .iter()
            .filter_map(|(k, v)| Some((as_string(k)?, as_string(v).unwrap_or_default())))
            .collect(),
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(as_string)
            .map(|item| match item.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (item, String::new()),
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// Parses a compose file (version 2/3 or the versionless compose format), with YAML
/// anchors and `<<` merge keys resolved and every string interpolated.
pub fn parse(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<ComposeFile, String> {
    let mut root: Value = serde_yaml::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    root.apply_merge()
        .map_err(|e| format!("YAML merge keys: {e}"))?;
    if let Some(Value::Mapping(services)) = root.get_mut("services") {
        for (_, service) in services.iter_mut() {
            service
                .apply_merge()
                .map_err(|e| format!("YAML merge keys: {e}"))?;
        }
    }
    for section in [
        "services", "volumes", "networks", "secrets", "configs", "version",
    ] {
        if let Some(v) = root.get_mut(section) {
            interpolate_tree(v, lookup)?;
        }
    }
    let version = root.get("version").and_then(as_string);
    let Some(Value::Mapping(services)) = root.get("services") else {
        return Err(
            "no `services:` section (the compose file formats of version 2 and later have one)"
                .into(),
        );
    };
    let mut out = ComposeFile {
        version,
        ..Default::default()
    };
    for (name, spec) in services {
        let Some(name) = as_string(name) else {
            continue;
        };
        let Value::Mapping(_) = spec else {
            return Err(format!("service {name} is not a mapping"));
        };
        let volumes = match spec.get("volumes") {
            Some(Value::Sequence(items)) => items.iter().filter_map(mount_target).collect(),
            _ => Vec::new(),
        };
        out.services.push(Service {
            image: spec.get("image").and_then(as_string),
            has_build: spec.get("build").is_some(),
            cap_add: string_list(spec.get("cap_add")),
            security_opt: string_list(spec.get("security_opt")),
            privileged: spec
                .get("privileged")
                .and_then(|v| v.as_bool())
                .unwrap_or(false),
            mount_targets: volumes,
            environment: environment(spec.get("environment")),
            name,
        });
    }
    if let Some(Value::Mapping(volumes)) = root.get("volumes") {
        out.volumes = volumes.keys().filter_map(as_string).collect();
    }
    Ok(out)
}

/// The capabilities to add, and why (said to the user when it escalates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityChoice {
    pub caps: Vec<String>,
    pub reasons: Vec<String>,
}

/// Least privilege: PERFMON and SYS_PTRACE; SYS_ADMIN in PERFMON's place only when asked,
/// when the engine rejects PERFMON (`perfmon` is its answer to a trial), or when the
/// kernel predates PERFMON (5.8).
pub fn choose_capabilities(
    sys_admin_asked: bool,
    perfmon: &Result<(), String>,
    kernel: &str,
    kernel_symbols: bool,
) -> CapabilityChoice {
    let mut reasons = Vec::new();
    let old_kernel = crate::perf::major_minor(kernel).is_some_and(|v| v < (5, 8));
    let monitor = if sys_admin_asked {
        reasons.push("SYS_ADMIN instead of PERFMON, as asked (--sys-admin); it grants much more than profiling needs".to_string());
        "SYS_ADMIN"
    } else if let Err(why) = perfmon {
        reasons.push(format!(
            "SYS_ADMIN instead of PERFMON: this engine does not know CAP_PERFMON ({}); SYS_ADMIN includes what PERFMON grants",
            why.trim()
        ));
        "SYS_ADMIN"
    } else if old_kernel {
        reasons.push(format!(
            "SYS_ADMIN instead of PERFMON: kernel {kernel} predates CAP_PERFMON (5.8), so only SYS_ADMIN opens perf events"
        ));
        "SYS_ADMIN"
    } else {
        "PERFMON"
    };
    let mut caps = vec![monitor.to_string(), "SYS_PTRACE".to_string()];
    if kernel_symbols {
        caps.push("SYSLOG".to_string());
        reasons.push("SYSLOG, as asked (--kernel-symbols): kernel symbol addresses while kptr_restrict hides them".to_string());
    }
    CapabilityChoice { caps, reasons }
}

/// What the override gives the chosen services.
#[derive(Debug, Clone, PartialEq)]
pub struct OverrideOptions {
    pub services: Vec<String>,
    pub caps: Vec<String>,
    pub privileged: bool,
    /// jemalloc heap profiling: `lg_prof_sample`.
    pub heap: Option<u32>,
    /// (service or None for all chosen ones, image)
    pub images: Vec<(Option<String>, String)>,
    /// The named volume mounted at `PROFILING_DIR`.
    pub volume: String,
    /// A comment at the top (how it was made).
    pub header: String,
}

pub const TRACEFS: &str = "/sys/kernel/tracing";
pub const PROFILING_DIR: &str = "/profiling";

/// The jemalloc options for a service's dumps in the profiling volume.
pub fn jemalloc_conf(service: &str, lg_prof_sample: u32) -> String {
    format!(
        "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:{lg_prof_sample},lg_prof_interval:-1,prof_prefix:{PROFILING_DIR}/jeprof.{service}"
    )
}

/// The override file's text, and notes for the user (what was left as it was and why).
pub fn make_override(
    file: &ComposeFile,
    options: &OverrideOptions,
) -> Result<(String, Vec<String>), String> {
    let mut notes = Vec::new();
    let mut services = Mapping::new();
    let mut volume_used = false;
    for name in &options.services {
        let service = file
            .services
            .iter()
            .find(|s| s.name == *name)
            .ok_or_else(|| {
                format!(
                    "no service '{name}' in the compose file (services: {})",
                    file.services
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        let mut spec = Mapping::new();
        let image = options
            .images
            .iter()
            .find(|(s, _)| s.as_deref() == Some(name.as_str()))
            .or_else(|| options.images.iter().find(|(s, _)| s.is_none()));
        if let Some((_, image)) = image {
            spec.insert("image".into(), image.clone().into());
        }
        let caps: Vec<Value> = options
            .caps
            .iter()
            .filter(|c| {
                !service
                    .cap_add
                    .iter()
                    .any(|have| have.trim_start_matches("CAP_") == c.as_str())
            })
            .map(|c| Value::from(c.clone()))
            .collect();
        if !caps.is_empty() {
            spec.insert("cap_add".into(), Value::Sequence(caps));
        }
        if !service
            .security_opt
            .iter()
            .any(|o| o.replace(':', "=") == "seccomp=unconfined")
        {
            spec.insert(
                "security_opt".into(),
                Value::Sequence(vec!["seccomp=unconfined".into()]),
            );
        }
        if options.privileged {
            spec.insert("privileged".into(), true.into());
        }
        let mut volumes = Vec::new();
        if service.mount_targets.iter().any(|t| t == TRACEFS) {
            notes.push(format!(
                "{name}: {TRACEFS} is already mounted; left as it is"
            ));
        } else {
            volumes.push(Value::from(format!("{TRACEFS}:{TRACEFS}")));
        }
        if service.mount_targets.iter().any(|t| t == PROFILING_DIR) {
            notes.push(format!(
                "{name}: something is already mounted at {PROFILING_DIR}; left as it is"
            ));
        } else {
            volumes.push(Value::from(format!("{}:{PROFILING_DIR}", options.volume)));
            volume_used = true;
        }
        if !volumes.is_empty() {
            spec.insert("volumes".into(), Value::Sequence(volumes));
        }
        if let Some(lg) = options.heap {
            let conf = jemalloc_conf(name, lg);
            let mut env = Mapping::new();
            for var in ["_RJEM_MALLOC_CONF", "MALLOC_CONF"] {
                match service.environment.get(var) {
                    Some(old) if crate::heap::dumps::JemallocConf::parse(old).profiling() => {
                        notes.push(format!(
                            "{name}: {var} already turns jemalloc profiling on; left as it is"
                        ));
                    }
                    Some(old) => {
                        notes.push(format!("{name}: {var} replaced (it was \"{old}\")"));
                        env.insert(var.into(), conf.clone().into());
                    }
                    None => {
                        env.insert(var.into(), conf.clone().into());
                    }
                }
            }
            if !env.is_empty() {
                spec.insert("environment".into(), Value::Mapping(env));
            }
        }
        services.insert(name.clone().into(), Value::Mapping(spec));
    }
    let mut root = Mapping::new();
    if let Some(version) = &file.version {
        root.insert("version".into(), version.clone().into());
    }
    root.insert("services".into(), Value::Mapping(services));
    if volume_used {
        let mut volumes = Mapping::new();
        volumes.insert(
            options.volume.clone().into(),
            Value::Mapping(Mapping::new()),
        );
        root.insert("volumes".into(), Value::Mapping(volumes));
    }
    let body = serde_yaml::to_string(&Value::Mapping(root)).map_err(|e| e.to_string())?;
    let header: String = options.header.lines().map(|l| format!("# {l}\n")).collect();
    Ok((format!("{header}{body}"), notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO: &str = include_str!("../compose/demo.yml");
    const EXAMPLE: &str = include_str!("../compose/examples/devnet.yml");
    const EXAMPLE_ENV: &str = include_str!("../compose/examples/.env");

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    #[test]
    fn interpolation_forms() {
        let env = vars(&[("A", "1"), ("EMPTY", "")]);
        assert_eq!(interpolate("x${A}y$A-$$A", &env).unwrap(), "x1y1-$A");
        assert_eq!(
            interpolate("${B:-dflt}|${EMPTY:-dflt}|${EMPTY-dflt}|${B-dflt}", &env).unwrap(),
            "dflt|dflt||dflt"
        );
        assert_eq!(interpolate("${B}", &env).unwrap(), "");
        assert_eq!(
            interpolate("${JEMALLOC_LG_PROF_INTERVAL:--1}", &env).unwrap(),
            "-1"
        );
        assert!(interpolate("${B:?set B in .env}", &env)
            .unwrap_err()
            .contains("set B in .env"));
        assert!(interpolate("${EMPTY?x}", &env).is_ok());
        assert!(interpolate("${A", &env).is_err());
        assert!(interpolate("cost: 5$", &env).is_err());
    }

    #[test]
    fn env_files() {
        let vars = parse_env_file(
            "# c\nA=1\nexport B = two words\nC='$lit'\nD=\"q\\nx\"\nE=v # note\nBAD LINE\n",
        );
        assert_eq!(vars["A"], "1");
        assert_eq!(vars["B"], "two words");
        assert_eq!(vars["C"], "$lit");
        assert_eq!(vars["D"], "q\nx");
        assert_eq!(vars["E"], "v");
        assert_eq!(vars.len(), 5);
    }

    #[test]
    fn reads_the_demo_devnet() {
        let file = parse(DEMO, &vars(&[("DEMO_LOCK_THREADS", "8")])).unwrap();
        let names: Vec<&str> = file.services.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, vec!["demo-seq", "demo-rpc"]);
        let seq = &file.services[0];
        assert_eq!(
            seq.image.as_deref(),
            Some("devprof-demo-node:latest"),
            "default of ${{DEVPROF_DEMO_IMAGE:-...}}"
        );
        assert!(
            seq.cap_add.contains(&"SYS_ADMIN".to_string()),
            "from the <<: *profiling anchor"
        );
        assert_eq!(seq.environment["DEMO_LOCK_THREADS"], "8");
        assert!(seq.environment["_RJEM_MALLOC_CONF"].contains("lg_prof_interval:-1"));
        assert!(seq.mount_targets.contains(&"/profiling".to_string()));
        assert_eq!(file.volumes, vec!["profiling", "seq-data", "rpc-data"]);
        assert_eq!(file.version, None);
    }

    #[test]
    fn override_for_the_demo_devnet_adds_only_what_is_missing() {
        let file = parse(DEMO, &vars(&[])).unwrap();
        let choice = choose_capabilities(
            false,
            &Err("invalid CapAdd: unknown capability: \"CAP_PERFMON\"".into()),
            "6.18.44",
            false,
        );
        assert_eq!(choice.caps, vec!["SYS_ADMIN", "SYS_PTRACE"]);
        assert!(choice.reasons[0].contains("does not know CAP_PERFMON"));
        let (text, notes) = make_override(
            &file,
            &OverrideOptions {
                services: vec!["demo-seq".into(), "demo-rpc".into()],
                caps: choice.caps,
                privileged: false,
                heap: Some(19),
                images: vec![],
                volume: "devprof-profiling".into(),
                header: "made by devprof".into(),
            },
        )
        .unwrap();
        assert!(text.starts_with("# made by devprof\n"));
        let v: Value = serde_yaml::from_str(&text).unwrap();
        let seq = &v["services"]["demo-seq"];
        // demo.yml already has both capabilities, seccomp, tracefs, /profiling and
        // jemalloc profiling on.
        assert_eq!(seq, &Value::Mapping(Mapping::new()), "{text}");
        assert!(
            v.get("volumes").is_none(),
            "no service needs the profiling volume"
        );
        assert!(notes.iter().any(|n| n == "demo-seq: _RJEM_MALLOC_CONF already turns jemalloc profiling on; left as it is"), "{notes:?}");
        assert!(notes
            .iter()
            .any(|n| n.contains("/sys/kernel/tracing is already mounted")));

        // With profiling turned off in the demo's settings, --heap turns it on.
        let off = parse(DEMO, &vars(&[("JEMALLOC_PROFILING", "false")])).unwrap();
        let (text, notes) = make_override(
            &off,
            &OverrideOptions {
                services: vec!["demo-rpc".into()],
                caps: vec!["SYS_ADMIN".into(), "SYS_PTRACE".into()],
                privileged: false,
                heap: Some(19),
                images: vec![],
                volume: "devprof-profiling".into(),
                header: String::new(),
            },
        )
        .unwrap();
        let v: Value = serde_yaml::from_str(&text).unwrap();
        let rpc = &v["services"]["demo-rpc"];
        assert_eq!(
            rpc["environment"]["_RJEM_MALLOC_CONF"].as_str().unwrap(),
            "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:19,lg_prof_interval:-1,prof_prefix:/profiling/jeprof.demo-rpc"
        );
        assert_eq!(
            rpc["environment"]["MALLOC_CONF"],
            rpc["environment"]["_RJEM_MALLOC_CONF"]
        );
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("demo-rpc: MALLOC_CONF replaced (it was \"prof:false,")),
            "{notes:?}"
        );
    }

    #[test]
    fn override_for_the_interpolated_example() {
        let env = parse_env_file(EXAMPLE_ENV);
        let lookup = |k: &str| env.get(k).cloned();
        let file = parse(EXAMPLE, &lookup).unwrap();
        let node = file.services.iter().find(|s| s.name == "node").unwrap();
        assert_eq!(
            node.image.as_deref(),
            Some("devprof-demo-node:latest"),
            "${{NODE_IMAGE:-...}} default"
        );
        assert_eq!(
            node.environment["DEMO_WORKLOADS"], env["NODE_WORKLOADS"],
            "${{NODE_WORKLOADS}} from .env"
        );
        let metrics = file.services.iter().find(|s| s.name == "metrics").unwrap();
        assert_eq!(
            metrics.image.as_deref(),
            Some(env["METRICS_IMAGE"].as_str())
        );
        assert!(
            parse(EXAMPLE, &|_| None)
                .unwrap_err()
                .contains("METRICS_IMAGE"),
            "required variable"
        );

        let choice = choose_capabilities(false, &Ok(()), "6.1.0", true);
        assert_eq!(choice.caps, vec!["PERFMON", "SYS_PTRACE", "SYSLOG"]);
        let (text, _) = make_override(
            &file,
            &OverrideOptions {
                services: vec!["node".into()],
                caps: choice.caps,
                privileged: false,
                heap: None,
                images: vec![
                    (Some("node".into()), "op-reth:profiling".into()),
                    (None, "other:1".into()),
                ],
                volume: "devprof-profiling".into(),
                header: String::new(),
            },
        )
        .unwrap();
        let v: Value = serde_yaml::from_str(&text).unwrap();
        let node = &v["services"]["node"];
        assert_eq!(node["image"], "op-reth:profiling");
        assert_eq!(
            node["cap_add"],
            serde_yaml::from_str::<Value>("[PERFMON, SYS_PTRACE, SYSLOG]").unwrap()
        );
        assert_eq!(node["security_opt"][0], "seccomp=unconfined");
        assert_eq!(
            node["volumes"][0],
            "/sys/kernel/tracing:/sys/kernel/tracing"
        );
        assert_eq!(node["volumes"][1], "devprof-profiling:/profiling");
        assert!(node.get("environment").is_none(), "no --heap");
        assert!(v["volumes"].get("devprof-profiling").is_some());
        assert!(v["services"].get("metrics").is_none());
        assert!(make_override(
            &file,
            &OverrideOptions {
                services: vec!["nope".into()],
                caps: vec![],
                privileged: false,
                heap: None,
                images: vec![],
                volume: "v".into(),
                header: String::new()
            }
        )
        .unwrap_err()
        .contains("services: node, metrics"));
    }

    #[test]
    fn version_is_carried_over_and_old_kernels_need_sys_admin() {
        let file = parse("version: '3.8'\nservices:\n  a:\n    image: x\n", &|_| None).unwrap();
        assert_eq!(file.version.as_deref(), Some("3.8"));
        let (text, _) = make_override(
            &file,
            &OverrideOptions {
                services: vec!["a".into()],
                caps: vec!["PERFMON".into()],
                privileged: true,
                heap: None,
                images: vec![],
                volume: "v".into(),
                header: String::new(),
            },
        )
        .unwrap();
        let v: Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(v["version"], "3.8");
        assert_eq!(v["services"]["a"]["privileged"], true);
        let choice = choose_capabilities(false, &Ok(()), "5.4.0-150-generic", false);
        assert_eq!(choice.caps[0], "SYS_ADMIN");
        assert!(choice.reasons[0].contains("predates"));
        assert_eq!(
            choose_capabilities(true, &Ok(()), "6.1", false).caps[0],
            "SYS_ADMIN"
        );
        assert!(parse("a: 1\n", &|_| None).unwrap_err().contains("services"));
    }
}
