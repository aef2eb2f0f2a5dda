//! The bridge under test as a real process: started with `sh -c` in a process group of its own,
//! its stdin and stdout the MCP client's stdio, its stderr kept with the case; and reaped with
//! its whole group at the end of the case, whatever it does (ignores SIGTERM, forks).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long the group has between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(300);

/// Most stderr bytes kept per case.
const STDERR_MAX: usize = 64 * 1024;

/// A started bridge process.
pub struct BridgeProcess {
    child: Child,
    pub pid: u32,
    stderr: tokio::task::JoinHandle<Vec<u8>>,
}

/// How the process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl BridgeProcess {
    /// Start `command` (`{url}` replaced by the server's URL) with `env` added, under `faketime`
    /// with its specification when `faketime` is given; its stdin and stdout are handed back for
    /// the client. An error says why it could not start.
    pub fn start(
        command: &str,
        url: &str,
        env: &[(String, String)],
        faketime: Option<(std::path::PathBuf, String)>,
    ) -> std::io::Result<(Self, ChildStdin, ChildStdout)> {
        let line = command.replace("{url}", url);
        let mut cmd = match faketime {
            Some((wrapper, spec)) => {
                let mut cmd = Command::new(wrapper);
                cmd.arg("-f").arg(spec).arg("sh");
                cmd
            }
            None => Command::new("sh"),
        };
        cmd.arg("-c")
            .arg(&line)
            .env("MCP_SERVER_URL", url)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let pid = child.id().unwrap_or(0);
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
            return Err(std::io::Error::other("the process has no stdio pipes"));
        };
        let stderr = tokio::spawn(keep_stderr(stderr));
        Ok((Self { child, pid, stderr }, stdin, stdout))
    }

    /// Wait for the process to exit on its own.
    pub async fn wait(&mut self) -> Exit {
        exit_of(self.child.wait().await)
    }

    /// Whether it has exited, without waiting.
    pub fn try_exit(&mut self) -> Option<Exit> {
        self.child.try_wait().ok().flatten().map(|status| exit_of(Ok(status)))
    }

    /// End the whole process group (SIGTERM, then SIGKILL after a grace), reap the leader, and
    /// hand back what it wrote on stderr.
    pub async fn reap(mut self) -> (Exit, Vec<u8>) {
        let exit = match self.try_exit() {
            Some(exit) => exit,
            None => {
                signal_group(self.pid, "TERM");
                match tokio::time::timeout(TERM_GRACE, self.child.wait()).await {
                    Ok(status) => exit_of(status),
                    Err(_) => {
                        signal_group(self.pid, "KILL");
                        exit_of(self.child.wait().await)
                    }
                }
            }
        };
        // Children it forked into its group go too, even once the leader is gone.
        signal_group(self.pid, "KILL");
        let stderr = match tokio::time::timeout(TERM_GRACE, &mut self.stderr).await {
            Ok(Ok(bytes)) => bytes,
            _ => {
                self.stderr.abort();
                Vec::new()
            }
        };
        (exit, stderr)
    }
}

/// Send `signal` to process group `pgid` (the bridge's: it leads its own group).
fn signal_group(pgid: u32, signal: &str) {
    if pgid == 0 {
        return;
    }
    let _ = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn exit_of(status: std::io::Result<std::process::ExitStatus>) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(status) => Exit { code: status.code(), signal: status.signal() },
        Err(_) => Exit { code: None, signal: None },
    }
}

/// Read stderr to the end, keeping the first [`STDERR_MAX`] bytes.
async fn keep_stderr(mut stderr: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = STDERR_MAX.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    kept
}
