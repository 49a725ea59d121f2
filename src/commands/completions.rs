//! `devprof completions SHELL`: clap_complete's script for the shell, plus a hook that
//! completes TARGET arguments to the engine's running containers and compose services by
//! calling the hidden `devprof __targets` (so the names are those of the moment, from
//! whichever engine DOCKER_HOST or the context names).

use crate::docker::target::ContainerInfo;
use crate::error::{Error, Result};
use clap_complete::Shell;
use std::time::Duration;

pub use crate::cli::TARGETS_COMMAND;

/// The subcommands whose first positional is a TARGET, and `profile`, whose positionals
/// all are (the last may be a duration, which the user types anyway).
const SINGLE_TARGET: &[&str] = &["cpu", "offcpu", "heap", "stat", "doctor"];
const MANY_TARGETS: &[&str] = &["profile"];

/// A completion list must come fast or not at all: a shell waits on it.
const TARGETS_TIMEOUT: Duration = Duration::from_secs(3);

pub fn write_script(shell: Shell) -> Result<()> {
    use clap::CommandFactory;
    let mut command = crate::cli::Cli::command();
    // Into a buffer first: clap_complete panics when stdout closes early (`| head`).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "devprof", &mut script);
    let script = with_targets(shell, &String::from_utf8_lossy(&script));
    crate::ui::term::data(script.as_bytes())
        .map_err(|e| Error::io("write the completion script", e))
}

/// The generated script with target completion added; shells without a hook are left
/// as they are.
pub fn with_targets(shell: Shell, script: &str) -> String {
    match shell {
        Shell::Bash => format!("{script}\n{}", bash_hook()),
        Shell::Fish => format!("{script}\n{}", fish_hook()),
        Shell::Zsh => zsh_with_targets(script),
        _ => script.to_string(),
    }
}

/// Bash: a wrapper around clap's `_devprof` that adds the names where a TARGET goes (the
/// word right after a single-target subcommand; any word of `profile` not after a flag).
fn bash_hook() -> String {
    format!(
        r#"# Container names for TARGET arguments, from the engine at completion time.
_devprof_with_targets() {{
    _devprof "$@"
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    [[ "$cur" == -* ]] && return 0
    local i sub="" at=0
    for (( i = 1; i < COMP_CWORD; i++ )); do
        case "${{COMP_WORDS[i]}}" in
            --output-dir) (( i++ )) ;;
            -*) ;;
            *) sub="${{COMP_WORDS[i]}}"; at=$i; break ;;
        esac
    done
    case "$sub" in
        {single}) (( COMP_CWORD == at + 1 )) || return 0 ;;
        {many}) [[ "$prev" == -* ]] && return 0 ;;
        *) return 0 ;;
    esac
    # Matched by hand: `compgen -W` would expand `$(...)` inside a name.
    local name
    while IFS= read -r name; do
        [[ "$name" == "$cur"* ]] && COMPREPLY+=( "$name" )
    done < <(devprof {cmd} 2>/dev/null)
}}
complete -F _devprof_with_targets -o bashdefault -o default devprof
"#,
        single = SINGLE_TARGET.join("|"),
        many = MANY_TARGETS.join("|"),
        cmd = TARGETS_COMMAND,
    )
}

/// Fish: the same positions as bash, decided by a function over the words typed so far.
fn fish_hook() -> String {
    format!(
        r#"# Container names for TARGET arguments, from the engine at completion time.
function __fish_devprof_wants_target
    set -l words (commandline -opc)
    set -e words[1]
    set -l sub ''
    set -l after 0
    set -l skip 0
    for w in $words
        if test $skip = 1
            set skip 0
            continue
        end
        if test -z "$sub"
            switch $w
                case --output-dir
                    set skip 1
                case '-*'
                case '*'
                    set sub $w
            end
            continue
        end
        string match -q -- '-*' $w; or set after (math $after + 1)
    end
    switch $sub
        case {single}
            test $after = 0
        case {many}
            true
        case '*'
            false
    end
end
complete -c devprof -n __fish_devprof_wants_target -f -a "(devprof {cmd} 2>/dev/null)"
"#,
        single = SINGLE_TARGET.join(" "),
        many = MANY_TARGETS.join(" "),
        cmd = TARGETS_COMMAND,
    )
}

/// Zsh: the TARGET positionals complete through `_devprof_targets` instead of
/// `_default`. They are known by their help ("Container name, ..." for the capture
/// commands, "Containers ..." for `profile`): `ls` and `clean` also have a `target`, but
/// theirs names a directory of the store, not a running container.
fn zsh_with_targets(script: &str) -> String {
    let positional = regex::Regex::new(
        r"(?m)^(\s*'(?:::target -- Container |\*::items -- Containers )[^\n]*?):_default' \\$",
    )
    .expect("valid pattern");
    let replaced = positional.replace_all(script, "$1:_devprof_targets' \\");
    let function = format!(
        "# Container names for TARGET arguments, from the engine at completion time.\n\
         (( $+functions[_devprof_targets] )) ||\n\
         _devprof_targets() {{\n    \
             local -a targets\n    \
             targets=(${{(f)\"$(devprof {TARGETS_COMMAND} 2>/dev/null)\"}})\n    \
             compadd -a targets\n\
         }}\n\n"
    );
    let closing = "if [ \"$funcstack[1]\" = \"_devprof\" ]; then";
    match replaced.find(closing) {
        Some(at) => format!("{}{function}{}", &replaced[..at], &replaced[at..]),
        None => format!("{replaced}\n{function}"),
    }
}

/// `devprof __targets`: running containers' names and their compose services, one a
/// line. Any failure prints nothing: a completion is no place for an error.
pub async fn print_targets() -> Result<()> {
    let listed = tokio::time::timeout(TARGETS_TIMEOUT, async {
        let docker = crate::docker::Docker::connect().await.ok()?;
        docker.containers().await.ok()
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_default();
    let mut out = String::new();
    for name in target_names(&listed) {
        out.push_str(&name);
        out.push('\n');
    }
    let _ = crate::ui::term::data(out.as_bytes());
    Ok(())
}

/// The names a TARGET may be given as: running containers and their compose services,
/// sorted, each once.
pub fn target_names(containers: &[ContainerInfo]) -> Vec<String> {
    let mut names: Vec<String> = containers
        .iter()
        .filter(|c| c.is_running())
        .flat_map(|c| std::iter::once(c.name.clone()).chain(c.service.clone()))
        .filter(|n| is_plain_name(n))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Docker's rule for container names (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`), which compose
/// service names follow too. Anything else (a label can hold any text) is never offered:
/// a shell must not be handed `$(...)`, globs or spaces by whoever can start a container.
fn is_plain_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, service: Option<&str>, state: &str) -> ContainerInfo {
        ContainerInfo {
            id: format!("{name}-id"),
            name: name.into(),
            image: "img".into(),
            state: state.into(),
            service: service.map(String::from),
            project: None,
            labels: Default::default(),
        }
    }

    #[test]
    fn targets_are_running_names_and_services_once_each() {
        let list = [
            container("demo-seq", Some("seq"), "running"),
            container("demo-rpc", Some("rpc"), "running"),
            container("proj-seq-2", Some("seq"), "running"),
            container("old", Some("old"), "exited"),
        ];
        assert_eq!(
            target_names(&list),
            ["demo-rpc", "demo-seq", "proj-seq-2", "rpc", "seq"]
        );
    }

    #[test]
    fn names_a_shell_would_expand_are_never_offered() {
        let list = [
            container("ok-1", Some("$(touch /tmp/owned)"), "running"),
            container("a b", Some("*"), "running"),
            container("svc_2.x", Some("`id`"), "running"),
        ];
        assert_eq!(target_names(&list), ["ok-1", "svc_2.x"]);
    }

    #[test]
    fn zsh_target_positionals_call_the_hook() {
        use clap::CommandFactory;
        let mut script = Vec::new();
        let mut command = crate::cli::Cli::command();
        clap_complete::generate(Shell::Zsh, &mut command, "devprof", &mut script);
        let out = zsh_with_targets(&String::from_utf8(script).unwrap());
        // cpu, offcpu, heap, stat, doctor and profile; not ls's or clean's store directory.
        let hooked = out
            .lines()
            .filter(|l| l.ends_with(":_devprof_targets' \\"))
            .count();
        assert_eq!(hooked, SINGLE_TARGET.len() + MANY_TARGETS.len(), "{out}");
        assert!(
            out.lines()
                .any(|l| l.contains("::target -- Only this container")
                    && l.ends_with(":_default' \\"))
        );
        assert!(out.find("_devprof_targets() {").unwrap() < out.find("if [ \"$funcstack").unwrap());
    }
}
