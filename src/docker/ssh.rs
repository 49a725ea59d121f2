//! `ssh://user@host[:port]` engines, reached as the docker CLI reaches them: every
//! connection is `ssh [-l user] [-p port] -- host docker system dial-stdio`, HTTP spoken over
//! its stdin and stdout. bollard connects to a private unix socket (in a 0700 directory of
//! its own, removed when the bridge is dropped) whose every connection is one such ssh.
//! The user's own ssh (config, agent, known_hosts) does the authenticating. bollard opens
//! a connection per request, dozens per capture: the ssh processes share one master
//! connection (ControlMaster, its socket in the same directory), told to exit when the
//! bridge goes, and gone by itself 30 s after its last use should devprof be killed.

use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::process::Command;

/// Where an `ssh://` address points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl SshTarget {
    /// Parses `ssh://[user@]host[:port][/]`; a path, query or empty host is refused as the
    /// CLI refuses them.
    pub fn parse(address: &str) -> Result<Self, String> {
        let rest = address
            .strip_prefix("ssh://")
            .ok_or_else(|| format!("{address}: not an ssh:// address"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#']) {
            return Err(format!(
                "{address}: an ssh engine address is ssh://[user@]host[:port], without a path"
            ));
        }
        let (user, host_port) = match rest.rsplit_once('@') {
            Some((user, hp)) => (Some(user.to_string()), hp),
            None => (None, rest),
        };
        let (host, port) = match host_port.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') || host.ends_with(']') => {
                let port = port
                    .parse::<u16>()
                    .map_err(|_| format!("{address}: '{port}' is not a port"))?;
                (host, Some(port))
            }
            _ => (host_port, None),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || user.as_deref() == Some("") {
            return Err(format!(
                "{address}: no host (or an empty user) in the address"
            ));
        }
        Ok(SshTarget {
            user,
            host: host.to_string(),
            port,
        })
    }

    /// The ssh arguments for one connection through the master at `control`; `--` keeps
    /// a host like `-oProxyCommand=...` from being read as an option.
    pub fn args(&self, control: &Path) -> Vec<String> {
        let mut args: Vec<String> = vec!["-o".into(), "ConnectTimeout=30".into(), "-T".into()];
        args.extend(
            [
                "ControlMaster=auto".to_string(),
                format!("ControlPath={}", control.display()),
                "ControlPersist=30".to_string(),
            ]
            .into_iter()
            .flat_map(|o| ["-o".to_string(), o]),
        );
        if let Some(user) = &self.user {
            args.extend(["-l".into(), user.clone()]);
        }
        if let Some(port) = self.port {
            args.extend(["-p".into(), port.to_string()]);
        }
        args.push("--".into());
        args.push(self.host.clone());
        args.extend(["docker", "system", "dial-stdio"].map(String::from));
        args
    }
}

/// The private socket and the task that turns its connections into ssh sessions.
pub struct SshBridge {
    dir: PathBuf,
    socket: PathBuf,
    control: PathBuf,
    host: String,
    accept: tokio::task::JoinHandle<()>,
    stderr: Arc<Mutex<String>>,
}

impl SshBridge {
    /// Opens the socket; nothing runs ssh until bollard connects.
    pub fn start(target: SshTarget) -> std::io::Result<Self> {
        let dir = private_dir()?;
        let socket = dir.join("docker.sock");
        let listener = match UnixListener::bind(&socket) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let stderr = Arc::new(Mutex::new(String::new()));
        let control = dir.join("master");
        let args = target.args(&control);
        let seen = stderr.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, args.clone(), seen.clone()));
            }
        });
        Ok(SshBridge {
            dir,
            socket,
            control,
            host: target.host,
            accept,
            stderr,
        })
    }

    /// The `unix://` address bollard connects to.
    pub fn address(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// What ssh last wrote on stderr (why it could not connect, typically).
    pub fn ssh_said(&self) -> String {
        self.stderr
            .lock()
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for SshBridge {
    fn drop(&mut self) {
        self.accept.abort();
        if self.control.exists() {
            let _ = std::process::Command::new("ssh")
                .arg("-o")
                .arg(format!("ControlPath={}", self.control.display()))
                .args(["-O", "exit", "--", &self.host])
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Ok(mut live) = LIVE.lock() {
            live.retain(|d| d != &self.dir);
        }
    }
}

/// The bridge directories of this process, for `remove_now` (an exit that skips Drop).
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes every bridge directory at once: the third Ctrl-C exits without unwinding.
/// (The ssh master, no longer used, exits 30 s later by itself.)
pub fn remove_now() {
    if let Ok(dirs) = LIVE.lock() {
        for dir in dirs.iter() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A fresh 0700 directory under the temp dir: only this user can reach the socket in it.
fn private_dir() -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    for attempt in 0..100u32 {
        let dir = base.join(format!(
            "devprof-ssh-{}-{nanos:x}-{attempt}",
            std::process::id()
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {
                if let Ok(mut live) = LIVE.lock() {
                    live.push(dir.clone());
                }
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(
        "no free name for the ssh bridge directory",
    ))
}

/// One bollard connection carried over one `ssh ... docker system dial-stdio`.
async fn relay(client: UnixStream, args: Vec<String>, seen: Arc<Mutex<String>>) {
    // A process group of its own: the terminal's Ctrl-C goes to devprof's group, and ssh
    // without a tty exits on SIGINT, which would cut the connection the capture still
    // needs to stop its recorder.
    let child = Command::new("ssh")
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            if let Ok(mut s) = seen.lock() {
                *s = format!("cannot run ssh: {e}");
            }
            return;
        }
    };
    let (Some(mut to_ssh), Some(mut from_ssh), Some(mut errors)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return;
    };
    let (mut from_client, mut to_client) = client.into_split();
    let upstream = async {
        let _ = tokio::io::copy(&mut from_client, &mut to_ssh).await;
        // The request side is done: dial-stdio passes the half-close on to the engine.
        let _ = to_ssh.shutdown().await;
        drop(to_ssh);
    };
    let downstream = async {
        let _ = tokio::io::copy(&mut from_ssh, &mut to_client).await;
        let _ = to_client.shutdown().await;
    };
    let stderr = async {
        let mut text = String::new();
        let _ = errors.read_to_string(&mut text).await;
        if !text.trim().is_empty() {
            if let Ok(mut s) = seen.lock() {
                *s = text;
            }
        }
    };
    tokio::join!(upstream, downstream, stderr);
    let _ = child.wait().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_the_cli_reads_them() {
        let t = SshTarget::parse("ssh://me@node.example:2222").unwrap();
        assert_eq!(t.user.as_deref(), Some("me"));
        assert_eq!(t.host, "node.example");
        assert_eq!(t.port, Some(2222));
        assert_eq!(
            t.args(Path::new("/run/d/master")),
            [
                "-o",
                "ConnectTimeout=30",
                "-T",
                "-o",
                "ControlMaster=auto",
                "-o",
                "ControlPath=/run/d/master",
                "-o",
                "ControlPersist=30",
                "-l",
                "me",
                "-p",
                "2222",
                "--",
                "node.example",
                "docker",
                "system",
                "dial-stdio"
            ]
        );
        let t = SshTarget::parse("ssh://host/").unwrap();
        assert_eq!((t.user, t.port), (None, None));
        let t = SshTarget::parse("ssh://u@[::1]:22").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", Some(22)));
        for bad in [
            "ssh://",
            "ssh://h/path",
            "ssh://h:port",
            "ssh://@h",
            "tcp://h",
        ] {
            assert!(SshTarget::parse(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn the_bridge_socket_is_private_and_removed_on_drop() {
        use std::os::unix::fs::PermissionsExt;
        let bridge = SshBridge::start(SshTarget::parse("ssh://h").unwrap()).unwrap();
        let dir = bridge.dir().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(bridge.address().starts_with("unix://"));
        drop(bridge);
        assert!(!dir.exists());
        // remove_now covers a bridge that is never dropped.
        let kept = SshBridge::start(SshTarget::parse("ssh://h").unwrap()).unwrap();
        assert!(kept.dir().is_dir());
        remove_now();
        assert!(!kept.dir().exists());
    }
}
