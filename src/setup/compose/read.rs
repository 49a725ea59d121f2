//! Reading compose files as docker-compose does: `.env` files, `${VAR}` interpolation,
//! YAML anchors and merge keys, the services with their images and profiling-relevant
//! settings. Pure: text in, data out.

use serde_yaml::Value;
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::setup::compose) const DEMO: &str =
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/compose/demo.yml"));

    /// Variables for interpolation, as a lookup.
    pub(in crate::setup::compose) fn vars(
        pairs: &[(&str, &str)],
    ) -> impl Fn(&str) -> Option<String> {
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
        assert_eq!(
            names,
            vec![
                "demo-seq",
                "demo-rpc",
                "demo-blocks",
                "demo-jvm",
                "demo-js",
                "demo-py",
                "demo-go",
                "demo-hostile"
            ]
        );
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
        assert_eq!(
            file.volumes,
            vec!["profiling", "seq-data", "rpc-data", "hostile-markers"]
        );
        assert_eq!(file.version, None);
    }
}
