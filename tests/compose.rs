//! `devprof compose` end to end: overrides for compose/demo.yml and for the example with
//! interpolation, validated by `docker-compose config`, and a container started with the
//! example's override, profiled by `devprof cpu`.

mod common;

use common::*;
use predicates::prelude::*;
use serde_yaml::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// The capability devprof must have chosen for perf_event_open on this engine.
fn expected_monitor_cap() -> &'static str {
    if engine_knows_perfmon() {
        "PERFMON"
    } else {
        "SYS_ADMIN"
    }
}

fn config(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Value {
    let mut cmd = std::process::Command::new("docker-compose");
    cmd.current_dir(cwd).args(args).arg("config");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("docker-compose");
    assert!(
        out.status.success(),
        "docker-compose {args:?} config rejected the override: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_yaml::from_slice(&out.stdout).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "needs the demo devnet"]
fn override_for_the_demo_devnet_is_accepted_by_docker_compose_config() {
    if !devnet_ready("override_for_the_demo_devnet_is_accepted_by_docker_compose_config") {
        return;
    }
    let root = repo_root();
    let demo = root.join("compose/demo.yml");
    let before = std::fs::read(&demo).unwrap();
    let dir = workdir();
    let out = dir.path().join("demo.override.yml");

    // Default services: those running a profiling image (the devnet's, made by devprof build).
    devprof(&root)
        .args(["compose", "-f", "compose/demo.yml", "-o"])
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "for demo-seq, demo-rpc, demo-blocks:",
        ))
        .stdout(predicate::str::contains(format!(
            "cap_add {}, SYS_PTRACE",
            expected_monitor_cap()
        )))
        .stdout(predicate::str::contains(format!(
            "docker-compose -f compose/demo.yml -f {} up -d demo-seq demo-rpc demo-blocks",
            out.display()
        )));
    assert_eq!(
        std::fs::read(&demo).unwrap(),
        before,
        "compose/demo.yml must not change"
    );
    config(
        &root,
        &["-f", "compose/demo.yml", "-f", out.to_str().unwrap()],
        &[],
    );

    // With the demo's jemalloc profiling off, --heap turns it on (both variables), and
    // the image is replaced for demo-seq only.
    let env = [("JEMALLOC_PROFILING", "false")];
    let mut cmd = devprof(&root);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let image = demo_image();
    cmd.args([
        "compose",
        "-f",
        "compose/demo.yml",
        "--services",
        "demo-seq",
        "--heap",
        "--kernel-symbols",
    ])
    .args(["--image", &format!("demo-seq={image}"), "-o"])
    .arg(&out)
    .assert()
    .success()
    .stdout(predicate::str::contains(
        "note: demo-seq: _RJEM_MALLOC_CONF replaced",
    ));
    let merged = config(
        &root,
        &["-f", "compose/demo.yml", "-f", out.to_str().unwrap()],
        &env,
    );
    let seq = &merged["services"]["demo-seq"];
    for var in ["_RJEM_MALLOC_CONF", "MALLOC_CONF"] {
        let conf = seq["environment"][var].as_str().unwrap();
        assert!(
            conf.starts_with("prof:true,prof_active:true")
                && conf.ends_with("prof_prefix:/profiling/jeprof.demo-seq"),
            "{var}={conf}"
        );
    }
    assert!(strings(&seq["cap_add"]).contains(&"SYSLOG".to_string()));
    assert_eq!(seq["image"].as_str(), Some(image.as_str()));
    let rpc_conf = merged["services"]["demo-rpc"]["environment"]["_RJEM_MALLOC_CONF"]
        .as_str()
        .unwrap();
    assert!(
        rpc_conf.starts_with("prof:false"),
        "demo-rpc was not chosen: {rpc_conf}"
    );
    assert_eq!(std::fs::read(&demo).unwrap(), before);
}

#[test]
#[ignore = "needs the demo devnet"]
fn example_with_interpolation_is_profiled_through_its_override() {
    if !devnet_ready("example_with_interpolation_is_profiled_through_its_override") {
        return;
    }
    let dir = workdir();
    let cwd = dir.path();
    for file in ["devnet.yml", ".env"] {
        std::fs::copy(
            repo_root().join("compose/examples").join(file),
            cwd.join(file),
        )
        .unwrap();
    }
    // The node's image comes from ${NODE_IMAGE:-devprof-demo-node:latest}.
    let image = demo_image();
    devprof(cwd)
        .env("NODE_IMAGE", &image)
        .args(["compose", "-f", "devnet.yml", "--heap"])
        .assert()
        .success()
        // `metrics` runs the plain base image: not chosen by default.
        .stdout(predicate::str::contains(
            "wrote devnet.devprof.yml (devnet.yml is unchanged) for node:",
        ))
        .stdout(predicate::str::contains(
            "docker-compose -f devnet.yml -f devnet.devprof.yml up -d node",
        ));
    let written = std::fs::read_to_string(cwd.join("devnet.devprof.yml")).unwrap();
    assert!(
        written.starts_with("# Written by `devprof compose` from devnet.yml"),
        "{written}"
    );

    let project = unique("devprof-test-compose");
    let files = [
        "-p",
        project.as_str(),
        "-f",
        "devnet.yml",
        "-f",
        "devnet.devprof.yml",
    ];
    let env = [("NODE_IMAGE", image.as_str())];
    let merged = config(cwd, &files, &env);
    let node = &merged["services"]["node"];
    assert_eq!(
        node["environment"]["DEMO_WORKLOADS"].as_str(),
        Some("hash_chain:40,state_lookup:10"),
        "${{NODE_WORKLOADS}} from .env"
    );
    let caps = strings(&node["cap_add"]);
    assert!(
        caps.contains(&expected_monitor_cap().to_string())
            && caps.contains(&"SYS_PTRACE".to_string()),
        "{caps:?}"
    );
    assert_eq!(strings(&node["security_opt"]), vec!["seccomp=unconfined"]);
    let volumes = format!("{:?}", node["volumes"]);
    assert!(
        volumes.contains("/sys/kernel/tracing") && volumes.contains("/profiling"),
        "{volumes}"
    );

    // Start it with both files and profile it.
    let _down = ComposeGuard {
        cwd: cwd.to_path_buf(),
        args: files.iter().map(|s| s.to_string()).collect(),
    };
    let mut up = std::process::Command::new("docker-compose");
    up.current_dir(cwd)
        .args(files)
        .args(["up", "-d", "node"])
        .env("NODE_IMAGE", &image);
    let out = up.output().unwrap();
    assert!(
        out.status.success(),
        "up: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(
        &docker_compose(cwd, &[&files[..], &["ps", "-q", "node"]].concat()).stdout,
    )
    .trim()
    .to_string();
    assert!(!id.is_empty(), "no container for node");
    let name = docker_ok(&["inspect", "-f", "{{.Name}}", &id])
        .trim_start_matches('/')
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !docker(&["exec", &name, "pgrep", "-x", "demo-node"])
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "demo-node did not start in {name}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let conf = docker_ok(&["exec", &name, "printenv", "_RJEM_MALLOC_CONF"]);
    assert!(
        conf.contains("prof:true") && conf.contains("prof_prefix:/profiling/jeprof.node"),
        "{conf}"
    );

    devprof(cwd)
        .args(["cpu", &name, "3", "--mode", "exec"])
        .assert()
        .success()
        .stdout(predicate::str::contains("files written"));
    let stem = only_capture(cwd, &name, "perf-");
    let folded = std::fs::read_to_string(with_ext(&stem, "folded")).unwrap();
    assert!(
        folded.contains("demo_node::workloads::hash_chain"),
        "hash_chain not in the profile"
    );
    devprof(cwd)
        .args(["doctor", &name])
        .assert()
        .success()
        .stdout(predicate::str::contains("nothing blocks profiling"));

    // Regression: the override mounted the host's tracefs read-write. Read-only, perf
    // still records tracepoints through it.
    let tracefs = docker_ok(&[
        "inspect",
        "-f",
        "{{range .Mounts}}{{if eq .Destination \"/sys/kernel/tracing\"}}{{.RW}}{{end}}{{end}}",
        &name,
    ]);
    assert_eq!(tracefs, "false", "tracefs mounted read-write");
    devprof(cwd)
        .args([
            "offcpu",
            &name,
            "3",
            "--mode",
            "exec",
            "--config",
            "contextswitches",
            "--fast",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("mounted tracefs").not());
    let manifest = read_manifest(&only_capture(cwd, &name, "offcpu-"));
    assert!(
        manifest["offcpu"]["counts"]["sched:sched_switch"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{manifest}"
    );
}
