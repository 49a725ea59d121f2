//! `devprof build` end to end: the real binary, the real engine. The demo node is built
//! from source exactly as scripts/testbed-up.sh builds the devnet's image (so the engine's
//! layer cache answers for it when nothing changed), the tools layer over the plain base
//! image, and a failing build.

mod common;

use common::*;
use predicates::prelude::*;
use std::time::Duration;

fn rust_image() -> String {
    std::env::var("DEVPROF_RUST_IMAGE").unwrap_or_else(|_| "rust:1-slim-bookworm".to_string())
}

fn label(image: &str, key: &str) -> String {
    docker_ok(&[
        "image",
        "inspect",
        "-f",
        &format!("{{{{index .Config.Labels \"{key}\"}}}}"),
        image,
    ])
}

#[test]
#[ignore = "needs the demo devnet"]
fn build_source_makes_the_demo_node_image_with_symbols_debuginfo_and_frame_pointers() {
    if !devnet_ready(
        "build_source_makes_the_demo_node_image_with_symbols_debuginfo_and_frame_pointers",
    ) {
        return;
    }
    let tag = format!("devprof-demo-node:build-test-{}", std::process::id());
    let _image = ImageGuard(tag.clone());
    let out = devprof(&repo_root())
        .args([
            "build",
            "source",
            ".",
            "--package",
            "demo-node",
            "--bin",
            "demo-node",
            "--tag",
            &tag,
        ])
        .args([
            "--base",
            &base_image(),
            "--rust-image",
            &rust_image(),
            "--label",
            "devprof.image=demo-node",
        ])
        // A liveness bound: it compiles the node from nothing beside the rest of the suite (684 s in CI).
        .timeout(Duration::from_secs(1800))
        .assert()
        .success()
        .stdout(predicate::str::contains(format!("built {tag}")))
        .stdout(predicate::str::contains("✓ perf runs"))
        .stdout(predicate::str::contains(
            "✓ /usr/local/bin/demo-node has symbols",
        ))
        .stdout(predicate::str::contains(
            "✓ /usr/local/bin/demo-node has debug info",
        ))
        .stdout(predicate::str::contains("✓ frame pointers"))
        .get_output()
        .stderr
        .clone();
    let stderr = String::from_utf8_lossy(&out);
    assert!(
        stderr.contains("package demo-node, binary demo-node"),
        "{stderr}"
    );
    assert!(
        stderr.contains("jemalloc heap profiling is built in"),
        "{stderr}"
    );
    assert_eq!(label(&tag, "devprof.profiling"), "source");
    assert_eq!(label(&tag, "devprof.binary"), "/usr/local/bin/demo-node");

    // Read the program out of the image independently (docker cp) and check it ourselves.
    let name = unique("devprof-test-build-cp");
    docker_ok(&["create", "--name", &name, &tag]);
    let _container = ContainerGuard(name.clone());
    let dir = workdir();
    let local = dir.path().join("demo-node");
    docker_ok(&[
        "cp",
        &format!("{name}:/usr/local/bin/demo-node"),
        local.to_str().unwrap(),
    ]);
    let elf = devprof::symbols::elf::read_file(&local).unwrap();
    assert!(elf.has_symbols() && elf.has_debug_info(), "{elf:?}");
    assert_eq!(
        elf.frame_pointers.verdict,
        devprof::symbols::elf::FpVerdict::Yes,
        "{:?}",
        elf.frame_pointers
    );
    assert_eq!(elf.jemalloc, devprof::symbols::elf::Jemalloc::Prefixed);
    let perf = docker_ok(&["run", "--rm", "--entrypoint", "perf", &tag, "--version"]);
    assert!(perf.starts_with("perf version"), "{perf}");
    let jeprof = docker(&[
        "run",
        "--rm",
        "--entrypoint",
        "sh",
        &tag,
        "-c",
        "command -v jeprof && command -v objdump && command -v pgrep",
    ]);
    assert!(
        jeprof.status.success(),
        "jemalloc's tools, binutils and procps in the image"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn build_tools_adds_perf_to_a_plain_image() {
    if !devnet_ready("build_tools_adds_perf_to_a_plain_image") {
        return;
    }
    let base = base_image();
    let tag = format!("devprof-test-tools:{}", std::process::id());
    let _image = ImageGuard(tag.clone());
    // Read from its output, not its exit code: the docker CLI against Podman's API reports
    // 0 for a `run --rm` whose command failed.
    let found = docker(&[
        "run",
        "--rm",
        &base,
        "sh",
        "-c",
        "command -v perf && echo found-perf",
    ]);
    assert!(
        !String::from_utf8_lossy(&found.stdout).contains("found-perf"),
        "the plain image must not have perf already"
    );
    let dir = workdir();
    // Its trust list is the test's own (the image goes at the end).
    let config = workdir();
    devprof(dir.path())
        .args(["build", "tools", &base, "--tag", &tag])
        .env("XDG_CONFIG_HOME", config.path())
        .timeout(Duration::from_secs(600))
        .assert()
        .success()
        .stdout(predicate::str::contains(format!("built {tag}")))
        // What devprof builds from the user's own settings, it trusts as a profiler image.
        .stdout(predicate::str::contains("trusted as a profiler image on"))
        .stdout(predicate::str::contains("✓ perf runs"))
        // Debian's command is a shell: there is no program of the image's own to check.
        .stdout(predicate::str::contains("- no program to check"));
    let perf = docker_ok(&["run", "--rm", &tag, "perf", "--version"]);
    assert!(perf.starts_with("perf version"), "{perf}");
    docker_ok(&[
        "run",
        "--rm",
        &tag,
        "sh",
        "-c",
        "command -v pgrep && command -v objdump",
    ]);
    assert_eq!(label(&tag, "devprof.profiling"), "tools");
    assert_eq!(label(&tag, "devprof.from"), base);
    let id = docker_ok(&["image", "inspect", "-f", "{{.Id}}", &tag]);
    devprof(dir.path())
        .args(["trust", "--list"])
        .env("XDG_CONFIG_HOME", config.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(&id["sha256:".len()..][..12]))
        .stdout(predicate::str::contains(&tag));
    // The command of the image it extends is kept.
    assert_eq!(
        docker_ok(&["image", "inspect", "-f", "{{json .Config.Cmd}}", &tag]),
        docker_ok(&["image", "inspect", "-f", "{{json .Config.Cmd}}", &base])
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn failing_build_names_the_step_and_its_output() {
    if !devnet_ready("failing_build_names_the_step_and_its_output") {
        return;
    }
    let dir = workdir();
    let dockerfile = dir.path().join("Failing.Dockerfile");
    std::fs::write(
        &dockerfile,
        format!(
            "FROM {}\nRUN echo devprof-test-marker && exit 3\n",
            base_image()
        ),
    )
    .unwrap();
    let tag = format!("devprof-test-failing:{}", std::process::id());
    let _image = ImageGuard(tag.clone());
    devprof(dir.path())
        .args(["build", "tools", &base_image(), "--tag", &tag, "--no-check"])
        .arg("--dockerfile")
        .arg(&dockerfile)
        .assert()
        .code(7)
        .stderr(predicate::str::contains(format!(
            "building {tag} failed at Step 2/"
        )))
        .stderr(predicate::str::contains(
            ": RUN echo devprof-test-marker && exit 3",
        ))
        // The builder's own words: Docker's, or buildah's behind Podman's API.
        .stderr(
            predicate::str::contains("returned a non-zero code: 3")
                .or(predicate::str::contains("exit status 3")),
        )
        .stderr(predicate::str::contains(
            "last output of that step:\n    devprof-test-marker",
        ));
}

#[test]
#[ignore = "needs the demo devnet"]
fn build_source_rejects_what_is_not_a_cargo_project_or_package() {
    if !devnet_ready("build_source_rejects_what_is_not_a_cargo_project_or_package") {
        return;
    }
    let empty = workdir();
    devprof(empty.path())
        .args(["build", "source", "."])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("has no Cargo.toml"));
    devprof(&repo_root())
        .args(["build", "source", ".", "--package", "no-such-package"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no package 'no-such-package'"))
        .stderr(predicate::str::contains("(packages: "))
        .stderr(predicate::str::contains("demo-node"));
    devprof(&repo_root())
        .args(["build", "source", "."])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("several packages have binaries"));
}
