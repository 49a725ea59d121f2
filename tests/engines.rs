//! Engines reached as the docker CLI reaches them, against the real engine: TLS
//! (DOCKER_TLS_VERIFY + DOCKER_CERT_PATH, and a context with TLS material) through a
//! TLS-terminating proxy (rustls) to the local socket, with a CA and certificates the test
//! makes with `openssl`; `ssh://` through an sshd the test starts as the current user; and the
//! completion scripts' container names, in a real bash.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Each test here records demo-seq; one at a time keeps them from measuring each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn run_ok(program: &str, args: &[&str], cwd: &Path) {
    let out = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (scripts/setup.sh installs it)"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A free port on 127.0.0.1 (the listener is closed again, so a race is possible but
/// harmless: the server that takes it fails loudly).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16, server: &mut Child) {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = server.try_wait().unwrap() {
            panic!("the server on port {port} ended: {status}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nothing listens on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `devprof cpu demo-seq 3` through the engine `configure` names is refused as an
/// unreachable daemon (exit 3); its stderr.
fn refused(cwd: &Path, configure: impl Fn(&mut assert_cmd::Command)) -> String {
    let mut cmd = devprof(cwd);
    cmd.args(["cpu", DEMO_SEQ, "3"]).env_remove("DOCKER_HOST");
    configure(&mut cmd);
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    stderr
}

/// A process the test started, killed when the test ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `openssl req` with a fresh P-256 key in `dir`: a self-signed CA certificate
/// (`-x509`) or a signing request.
fn openssl_req(dir: &Path, self_signed: bool, key: &str, out: &str, cn: &str) {
    let subject = format!("/CN={cn}");
    let mut args = vec!["req"];
    if self_signed {
        args.extend(["-x509", "-days", "2"]);
    }
    args.extend([
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        key,
        "-out",
        out,
        "-subj",
        &subject,
    ]);
    run_ok("openssl", &args, dir);
}

/// A CA with a key, in `dir`: `ca.pem`, `ca-key.pem`.
fn make_ca(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    openssl_req(dir, true, "ca-key.pem", "ca.pem", name);
}

/// A certificate for `cn` signed by the CA in `ca_dir`, written as `out_dir/cert.pem` and
/// `out_dir/key.pem`, with `extensions` (subjectAltName, extendedKeyUsage).
fn make_cert(ca_dir: &Path, out_dir: &Path, cn: &str, extensions: &str) {
    std::fs::create_dir_all(out_dir).unwrap();
    std::fs::write(out_dir.join("ext.cnf"), extensions).unwrap();
    openssl_req(out_dir, false, "key.pem", "req.csr", cn);
    let ca = |f: &str| ca_dir.join(f).to_string_lossy().into_owned();
    run_ok(
        "openssl",
        &[
            "x509",
            "-req",
            "-in",
            "req.csr",
            "-CA",
            &ca("ca.pem"),
            "-CAkey",
            &ca("ca-key.pem"),
            "-CAcreateserial",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
        out_dir,
    );
}

/// The TLS material of a daemon started with `--tlsverify`: the engine's CA, a server
/// certificate for 127.0.0.1, a client directory as DOCKER_CERT_PATH wants it, and a
/// second client directory whose ca.pem is another CA's.
struct Pki {
    _root: tempfile::TempDir,
    server: PathBuf,
    client: PathBuf,
    wrong_ca_client: PathBuf,
}

fn make_pki() -> Pki {
    let root = workdir();
    let ca = root.path().join("ca");
    make_ca(&ca, "devprof test engine CA");
    let server = root.path().join("server");
    make_cert(
        &ca,
        &server,
        "127.0.0.1",
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    );
    std::fs::copy(ca.join("ca.pem"), server.join("ca.pem")).unwrap();
    let client = root.path().join("client");
    make_cert(&ca, &client, "client", "extendedKeyUsage=clientAuth\n");
    std::fs::copy(ca.join("ca.pem"), client.join("ca.pem")).unwrap();
    let other = root.path().join("other-ca");
    make_ca(&other, "some other CA");
    let wrong_ca_client = root.path().join("wrong");
    std::fs::create_dir_all(&wrong_ca_client).unwrap();
    for f in ["cert.pem", "key.pem"] {
        std::fs::copy(client.join(f), wrong_ca_client.join(f)).unwrap();
    }
    std::fs::copy(other.join("ca.pem"), wrong_ca_client.join("ca.pem")).unwrap();
    Pki {
        _root: root,
        server,
        client,
        wrong_ca_client,
    }
}

/// A TLS-terminating proxy on 127.0.0.1 in front of the local engine's socket, asking for
/// a client certificate from the CA as `dockerd --tlsverify` does. It runs on a thread of
/// its own for the rest of the test process.
fn tls_proxy(pki: &Pki) -> u16 {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::sync::Arc;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(pki.server.join("cert.pem"))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_file(pki.server.join("key.pem")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(pki.server.join("ca.pem")).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .unwrap();
    let config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A handshake that fails (wrong CA on the client's side) just ends.
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    let Ok(mut engine) =
                        tokio::net::UnixStream::connect("/var/run/docker.sock").await
                    else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut engine).await;
                });
            }
        });
    });
    port
}

/// One test at a time, the certificates and the proxy, when demo-seq runs (None: the
/// test does not run, and says so).
fn tls_engine(test: &str) -> Option<(std::sync::MutexGuard<'static, ()>, Pki, u16)> {
    let serial = one_at_a_time();
    if !demo_container_ready(test, DEMO_SEQ) {
        return None;
    }
    let pki = make_pki();
    let port = tls_proxy(&pki);
    Some((serial, pki, port))
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_tls_engine_with_docker_tls_verify_works_end_to_end_and_a_wrong_ca_is_refused() {
    let Some((_serial, pki, port)) = tls_engine(
        "a_tls_engine_with_docker_tls_verify_works_end_to_end_and_a_wrong_ca_is_refused",
    ) else {
        return;
    };
    let host = format!("tcp://127.0.0.1:{port}");
    let cwd = workdir();
    assert_cpu_through(cwd.path(), |cmd| {
        cmd.env("DOCKER_HOST", &host)
            .env("DOCKER_TLS_VERIFY", "1")
            .env("DOCKER_CERT_PATH", &pki.client);
    });

    // The engine's certificate is not signed by the CA the client trusts.
    let stderr = refused(cwd.path(), |cmd| {
        cmd.env("DOCKER_HOST", &host)
            .env("DOCKER_TLS_VERIFY", "1")
            .env("DOCKER_CERT_PATH", &pki.wrong_ca_client);
    });
    assert!(
        stderr.contains("not signed by") && stderr.contains("ca.pem"),
        "{stderr}"
    );
    // No ca.pem where DOCKER_CERT_PATH points: said before any connection.
    let empty = workdir();
    let stderr = refused(cwd.path(), |cmd| {
        cmd.env("DOCKER_HOST", &host)
            .env("DOCKER_TLS_VERIFY", "1")
            .env("DOCKER_CERT_PATH", empty.path());
    });
    assert!(stderr.contains("DOCKER_CERT_PATH"), "{stderr}");
    // Plain HTTP to the TLS port does not pass for a working engine.
    refused(cwd.path(), |cmd| {
        cmd.env("DOCKER_HOST", &host)
            .env_remove("DOCKER_TLS_VERIFY");
    });
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_docker_context_with_tls_material_reaches_the_engine() {
    let Some((_serial, pki, port)) =
        tls_engine("a_docker_context_with_tls_material_reaches_the_engine")
    else {
        return;
    };
    // As `docker context create secure --docker host=...,ca=...,cert=...,key=...` stores it.
    let home = workdir();
    let docker_dir = home.path().join(".docker");
    let meta = docker_dir.join("contexts/meta/5ec0e");
    std::fs::create_dir_all(&meta).unwrap();
    std::fs::write(
        meta.join("meta.json"),
        format!(r#"{{"Name":"secure","Metadata":{{}},"Endpoints":{{"docker":{{"Host":"tcp://127.0.0.1:{port}","SkipTLSVerify":false}}}}}}"#),
    )
    .unwrap();
    let tls = docker_dir.join("contexts/tls/5ec0e/docker");
    std::fs::create_dir_all(&tls).unwrap();
    for f in ["ca.pem", "cert.pem", "key.pem"] {
        std::fs::copy(pki.client.join(f), tls.join(f)).unwrap();
    }
    let cwd = workdir();
    let out = devprof(cwd.path())
        .arg("__targets")
        .env_remove("DOCKER_HOST")
        .env_remove("DOCKER_CONFIG")
        .env_remove("DOCKER_TLS_VERIFY")
        .env("HOME", home.path())
        .env("DOCKER_CONTEXT", "secure")
        .output()
        .unwrap();
    let names = String::from_utf8_lossy(&out.stdout);
    assert!(
        names.lines().any(|l| l == DEMO_SEQ),
        "the context's engine lists {DEMO_SEQ}: {names:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The same context with the other CA's ca.pem: a clear refusal, exit 3.
    std::fs::copy(pki.wrong_ca_client.join("ca.pem"), tls.join("ca.pem")).unwrap();
    let stderr = refused(cwd.path(), |cmd| {
        cmd.env_remove("DOCKER_CONFIG")
            .env("HOME", home.path())
            .env("DOCKER_CONTEXT", "secure");
    });
    assert!(
        stderr.contains("'secure'") && stderr.contains("not signed by"),
        "{stderr}"
    );
}

/// An sshd on 127.0.0.1 that lets the current user in with a key of the test's, and an
/// `ssh` first on PATH that uses that key and skips host-key checking (the host key is
/// made up for the test).
struct SshEngine {
    _dir: tempfile::TempDir,
    _sshd: Server,
    port: u16,
    path: String,
    user: String,
}

fn sshd_binary() -> PathBuf {
    ["/usr/sbin/sshd", "/usr/bin/sshd"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("sshd (openssh-server; scripts/setup.sh installs it)")
}

fn ssh_engine() -> SshEngine {
    let dir = workdir();
    let d = dir.path();
    for key in ["host_key", "id"] {
        run_ok(
            "ssh-keygen",
            &["-q", "-t", "ed25519", "-N", "", "-f", key],
            d,
        );
    }
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    // Only this user's key file: any other user is refused.
    std::fs::copy(d.join("id.pub"), d.join(format!("authorized_keys.{user}"))).unwrap();
    let port = free_port();
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\nAuthorizedKeysFile {dir}/authorized_keys.%u\n\
         PidFile {dir}/sshd.pid\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
         KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n",
        dir = d.display()
    );
    std::fs::write(d.join("sshd_config"), config).unwrap();
    // sshd's privilege separation directory; the package's service would make it.
    let _ = std::fs::create_dir_all("/run/sshd");
    let mut sshd = Command::new(sshd_binary())
        .args(["-D", "-e", "-f"])
        .arg(d.join("sshd_config"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sshd");
    wait_for_port(port, &mut sshd);
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        d.join("ssh_config"),
        format!(
            "Host *\n  IdentityFile {dir}/id\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  \
             UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  BatchMode yes\n",
            dir = d.display()
        ),
    )
    .unwrap();
    let wrapper = bin.join("ssh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec /usr/bin/ssh -F {} \"$@\"\n",
            d.join("ssh_config").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    SshEngine {
        _dir: dir,
        _sshd: Server(sshd),
        port,
        path,
        user,
    }
}

#[test]
#[ignore = "needs the demo devnet"]
fn an_ssh_engine_works_end_to_end_through_docker_system_dial_stdio() {
    let _serial = one_at_a_time();
    let test = "an_ssh_engine_works_end_to_end_through_docker_system_dial_stdio";
    if !demo_container_ready(test, DEMO_SEQ) {
        return;
    }
    let engine = ssh_engine();
    let host = format!("ssh://{}@127.0.0.1:{}", engine.user, engine.port);
    // devprof's bridge socket goes under TMPDIR: it must be gone afterwards.
    let tmp = workdir();
    let cwd = workdir();
    assert_cpu_through(cwd.path(), |cmd| {
        cmd.env("DOCKER_HOST", &host)
            .env("PATH", &engine.path)
            .env("TMPDIR", tmp.path());
    });
    let out = devprof(cwd.path())
        .arg("__targets")
        .env("DOCKER_HOST", &host)
        .env("PATH", &engine.path)
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == DEMO_SEQ),
        "{out:?}"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "the ssh bridge left {left:?}");

    // A user the sshd does not let in: ssh's own words, exit 3.
    let stderr = refused(cwd.path(), |cmd| {
        cmd.env(
            "DOCKER_HOST",
            format!("ssh://nobody@127.0.0.1:{}", engine.port),
        )
        .env("PATH", &engine.path)
        .env("TMPDIR", tmp.path());
    });
    assert!(
        stderr.contains("ssh said") && stderr.contains("Permission denied"),
        "{stderr}"
    );
}

/// What the shell offers for the last word of `line`, with the script of
/// `devprof completions SHELL` loaded and the test's devprof first on PATH.
fn shell_completes(shell: &str, cwd: &Path, line: &[&str]) -> Vec<String> {
    let script = cwd.join(format!("devprof.{shell}"));
    if !script.exists() {
        let out = devprof(cwd).args(["completions", shell]).output().unwrap();
        assert!(out.status.success());
        std::fs::write(&script, &out.stdout).unwrap();
    }
    let program = match shell {
        // What bash does on TAB: COMP_WORDS/COMP_CWORD set, the registered function called.
        "bash" => format!(
            "source '{}'\n\
             fn=$(complete -p devprof | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')\n\
             COMP_WORDS=({}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))\n\
             COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}\n\
             \"$fn\" devprof \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
             printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
            script.display(),
            line.iter()
                .map(|w| format!("'{w}'"))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        // fish answers for a command line it is given.
        _ => format!(
            "source '{}'; complete -C '{}'",
            script.display(),
            line.join(" ")
        ),
    };
    let bin_dir = assert_cmd::cargo::cargo_bin("devprof")
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new(shell);
    if shell == "fish" {
        cmd.arg("--no-config");
    }
    let out = cmd
        .args(["-c", &program])
        .env("PATH", path)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("{shell}: {e} (scripts/setup.sh installs it)"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // fish adds a tab and a description; the word is before it.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split('\t').next())
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

fn completes_targets_in(shell: &str) {
    let test = format!("{shell}_completes_a_target_to_the_running_container");
    if !demo_container_ready(&test, DEMO_SEQ) {
        return;
    }
    let cwd = workdir();
    let complete = |line: &[&str]| shell_completes(shell, cwd.path(), line);
    let got = complete(&["devprof", "cpu", "demo-s"]);
    assert!(got.iter().any(|w| w == DEMO_SEQ), "{shell}: {got:?}");
    assert!(
        got.iter().all(|w| w.starts_with("demo-s")),
        "{shell}: {got:?}"
    );
    // Every target of `profile`; and not where a duration goes after cpu's target, nor
    // for ls (its TARGET is a directory of the store).
    let got = complete(&["devprof", "profile", DEMO_SEQ, "demo-s"]);
    assert!(got.iter().any(|w| w == DEMO_SEQ), "{shell}: {got:?}");
    for line in [
        &["devprof", "cpu", DEMO_SEQ, "demo-s"][..],
        &["devprof", "ls", "demo-s"][..],
    ] {
        let got = complete(line);
        assert!(
            !got.iter().any(|w| w == DEMO_SEQ),
            "{shell} {line:?}: {got:?}"
        );
    }
    // Flags still complete as clap's script completes them.
    let got = complete(&["devprof", "cpu", "--call-g"]);
    assert_eq!(got, ["--call-graph"], "{shell}");
}

#[test]
#[ignore = "needs the demo devnet"]
fn bash_completes_a_target_to_the_running_container() {
    completes_targets_in("bash");
}

#[test]
#[ignore = "needs the demo devnet"]
fn fish_completes_a_target_to_the_running_container() {
    completes_targets_in("fish");
}
