//! The store answers to the names users type: on a compose project without
//! `container_name` (the container is `<project>-<service>-1`), a capture of `SERVICE`
//! is found again by `SERVICE`, `PROJECT/SERVICE` and the container id's prefix in `top`,
//! `ls`, `diff`, `export` and `clean`.

mod common;

use common::*;
use predicates::prelude::*;
use std::process::Command;

const SERVICE: &str = "names-node";

#[test]
#[ignore = "needs the demo devnet"]
fn a_capture_of_a_compose_service_is_found_by_the_service_in_every_store_command() {
    if !devnet_ready("store_names") {
        return;
    }
    let work = workdir();
    let cwd = work.path();
    std::fs::write(
        cwd.join("names.yml"),
        format!(
            "services:\n  {SERVICE}:\n    image: {}\n    init: true\n    cap_add: [SYS_ADMIN, SYS_PTRACE, IPC_LOCK]\n    \
             security_opt: [seccomp=unconfined]\n    stop_grace_period: 1s\n    environment:\n      \
             DEMO_WORKLOADS: \"hash_chain:40\"\n",
            demo_image()
        ),
    )
    .unwrap();
    let project = unique("devprof-names-test");
    let files = ["-p", project.as_str(), "-f", "names.yml"];
    let _down = ComposeGuard {
        cwd: cwd.to_path_buf(),
        args: files.iter().map(|s| s.to_string()).collect(),
    };
    let up = Command::new("docker-compose")
        .current_dir(cwd)
        .args(files)
        .args(["up", "-d"])
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "up: {}",
        String::from_utf8_lossy(&up.stderr)
    );
    let id =
        String::from_utf8_lossy(&docker_compose(cwd, &[&files[..], &["ps", "-q"]].concat()).stdout)
            .trim()
            .to_string();
    assert!(!id.is_empty(), "no container for {SERVICE}");
    let container = docker_ok(&["inspect", "-f", "{{.Name}}", &id])
        .trim_start_matches('/')
        .to_string();
    assert_ne!(
        container, SERVICE,
        "the container must not be named after the service"
    );

    devprof(cwd).args(["cpu", SERVICE, "2"]).assert().success();

    // The manifest records the compose project and service.
    let stem = only_capture(cwd, &container, "perf-");
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["target"], SERVICE);
    assert_eq!(manifest["container"]["service"], SERVICE);
    assert_eq!(manifest["container"]["project"], project.as_str());
    let capture = stem.file_name().unwrap().to_str().unwrap().to_string();

    // The store's index says which directory holds the service, right after the capture.
    let index = store_index(cwd);
    let entry = index["directories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["service"] == SERVICE)
        .unwrap_or_else(|| panic!("no entry for {SERVICE} in {index}"));
    assert_eq!(entry["dir"], container.as_str());
    assert_eq!(entry["project"], project.as_str());
    assert_eq!(entry["captures"], 1);
    assert_eq!(entry["kinds"], serde_json::json!(["cpu"]));

    let qualified = format!("{project}/{SERVICE}");
    for name in [SERVICE, qualified.as_str(), &id[..12]] {
        devprof(cwd)
            .args(["ls", name])
            .assert()
            .success()
            .stdout(predicate::str::contains(capture.as_str()));
    }
    devprof(cwd)
        .args(["top", SERVICE, "-n", "3"])
        .assert()
        .success()
        .stdout(predicate::str::contains("self"));
    devprof(cwd)
        .args(["diff", SERVICE, &qualified, "--json"])
        .assert()
        .success();
    devprof(cwd)
        .args(["export", SERVICE, "-f", "collapsed", "-o", "out.collapsed"])
        .assert()
        .success();
    assert!(std::fs::metadata(cwd.join("out.collapsed")).unwrap().len() > 0);
    devprof(cwd)
        .args(["render", SERVICE, "-o", "again.svg"])
        .assert()
        .success();
    assert!(cwd.join("again.svg").is_file());

    // A service that no capture has is an error naming the containers that have some.
    devprof(cwd)
        .args(["ls", "no-such-service"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(container.as_str()));

    devprof(cwd)
        .args(["clean", SERVICE, "--older", "0s"])
        .assert()
        .success();
    assert!(
        !with_ext(&stem, "json").exists(),
        "clean {SERVICE} left {}",
        stem.display()
    );
    devprof(cwd).args(["ls", SERVICE]).assert().failure();
    let index = store_index(cwd);
    assert!(
        !index["directories"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["service"] == SERVICE),
        "clean left the service in the index: {index}"
    );
}

fn store_index(cwd: &std::path::Path) -> serde_json::Value {
    let path = cwd.join("profiling").join("index.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}
