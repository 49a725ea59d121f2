//! `--mark`: marker rules for the capture commands, checked once. `NAME=REGEX` adds a
//! rule, `@FILE` adds a rules file's rules, a built-in set's name (`reth`, `geth`, ...)
//! chooses that set instead of the automatic choice, `auto` is the default, `off` turns the
//! built-in sets off, `help` lists them.

use crate::error::{Error, Result};
use crate::profile::markers::builtin;
use crate::profile::markers::rules::{parse_mark, parse_rules_file};
use crate::profile::markers::{MarkPlan, SetChoice};

/// Longest rules file read.
const MAX_RULES_FILE: u64 = 64 << 10;

/// What `--mark` asked for.
#[derive(Debug, Clone)]
pub enum Marks {
    /// `--mark help`: print the rules and stop.
    Help,
    Plan(MarkPlan),
}

pub fn from_values(values: &[String]) -> Result<Marks> {
    let mut user = Vec::new();
    let mut sets = SetChoice::Auto;
    for value in values {
        let value = value.trim();
        match value {
            "help" => return Ok(Marks::Help),
            "auto" => sets = SetChoice::Auto,
            "off" | "none" => sets = SetChoice::Off,
            v if v.starts_with('@') => {
                let path = &v[1..];
                let text = read_rules_file(path)?;
                user.extend(parse_rules_file(&text, path).map_err(Error::Usage)?);
            }
            v if v.contains('=') => user.push(parse_mark(v).map_err(Error::Usage)?),
            v => match builtin::find(v) {
                Some(set) => match &mut sets {
                    SetChoice::Named(list) => list.push(set.name.to_string()),
                    _ => sets = SetChoice::Named(vec![set.name.to_string()]),
                },
                None => {
                    return Err(Error::Usage(format!(
                        "--mark '{v}' is neither NAME=REGEX, @FILE, a rule set ({}), auto, off nor help",
                        builtin::SETS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
                    )))
                }
            },
        }
    }
    Ok(Marks::Plan(MarkPlan { user, sets }))
}

fn read_rules_file(path: &str) -> Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| Error::Usage(format!("--mark @{path}: cannot open the rules file: {e}")))?;
    let mut text = String::new();
    file.take(MAX_RULES_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| Error::Usage(format!("--mark @{path}: cannot read it as text: {e}")))?;
    if text.len() as u64 > MAX_RULES_FILE {
        return Err(Error::Usage(format!(
            "--mark @{path}: larger than {} KiB; a rules file holds a few lines",
            MAX_RULES_FILE >> 10
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(values: &[&str]) -> Result<MarkPlan> {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        match from_values(&values)? {
            Marks::Plan(p) => Ok(p),
            Marks::Help => panic!("help"),
        }
    }

    #[test]
    fn mark_values_choose_sets_and_add_rules() {
        assert_eq!(plan(&[]).unwrap().sets, SetChoice::Auto);
        let p = plan(&["reth", "op-node", "blk=number=(?P<number>\\d+)"]).unwrap();
        assert_eq!(
            p.sets,
            SetChoice::Named(vec!["reth".into(), "op-node".into()])
        );
        assert_eq!(p.user.len(), 1);
        assert_eq!(plan(&["off"]).unwrap().sets, SetChoice::Off);
        assert!(matches!(
            from_values(&["help".to_string()]).unwrap(),
            Marks::Help
        ));
        assert!(plan(&["nethermind"]).is_err());
        assert!(plan(&["@/nonexistent/rules"]).is_err());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rules");
        std::fs::write(&file, "# mine\nslot=slot (?P<slot>\\d+)\n").unwrap();
        let p = plan(&[&format!("@{}", file.display())]).unwrap();
        assert_eq!(p.user[0].name, "slot");
        let names = p.rules_for(&["op-reth"]);
        assert_eq!(names[0].name, "slot");
        assert!(names.iter().any(|r| r.set == "reth"));
    }
}
