//! A child process in its own process group: stdout lines are logged to a file and
//! offered to the test, stderr goes to a file, and drop kills the whole group — so an
//! agentctl and agent the child started die with it, also when a test fails.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::sync::mpsc;

/// A running child, leader of its own process group.
#[derive(Debug)]
pub struct GroupProcess {
    name: String,
    child: Child,
    stdout_log: PathBuf,
    stderr_log: PathBuf,
    lines: mpsc::UnboundedReceiver<String>,
}

impl GroupProcess {
    /// Spawns `command` with stdout/stderr logged to `<dir>/<name>.stdout.log` and
    /// `<dir>/<name>.stderr.log`.
    ///
    /// # Panics
    /// When it cannot be started.
    pub fn spawn(name: &str, mut command: Command, dir: &Path) -> Self {
        let stdout_log = dir.join(format!("{name}.stdout.log"));
        let stderr_log = dir.join(format!("{name}.stderr.log"));
        let stderr = File::create(&stderr_log).expect("create the stderr log");
        let mut child = command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {name} ({command:?}): {err}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        let mut log = File::create(&stdout_log).expect("create the stdout log");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(log, "{line}");
                let _ = tx.send(line);
            }
        });
        Self {
            name: name.to_owned(),
            child,
            stdout_log,
            stderr_log,
            lines,
        }
    }

    /// Its pid (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a stdout line starting with `prefix` and returns the rest of it.
    ///
    /// # Panics
    /// When the process closes stdout (exits) or `deadline` passes, showing its stderr.
    pub async fn wait_for_line(&mut self, prefix: &str, deadline: Duration) -> String {
        let until = tokio::time::Instant::now() + deadline;
        loop {
            match tokio::time::timeout_at(until, self.lines.recv()).await {
                Ok(Some(line)) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.trim().to_owned();
                    }
                }
                Ok(None) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    panic!(
                        "{} exited ({status}) before printing {prefix}; stderr:\n{}",
                        self.name,
                        self.stderr()
                    );
                }
                Err(_) => panic!(
                    "{} did not print {prefix} within {deadline:?}; stderr:\n{}",
                    self.name,
                    self.stderr()
                ),
            }
        }
    }

    /// Everything it wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_log).unwrap_or_default()
    }

    /// Everything it wrote to stdout so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout_log).unwrap_or_default()
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERMs the leader and waits up to `grace` for it to exit (a graceful stop),
    /// then SIGKILLs whatever is left of the group. Returns whether it exited in time.
    pub async fn terminate(&mut self, grace: Duration) -> bool {
        kill(&self.pid().to_string(), "TERM");
        let exited = crate::wait::poll(grace, || {
            let gone = (!self.is_running()).then_some(());
            async move { gone }
        })
        .await
        .is_some();
        self.kill_group();
        exited
    }

    /// SIGKILLs the whole process group and reaps the leader.
    pub fn kill_group(&mut self) {
        kill(&format!("-{}", self.pid()), "KILL");
        let _ = self.child.wait();
    }

    /// Its exit code once it has exited: `None` while it runs or when a signal ended it.
    pub fn exit_code(&mut self) -> Option<i32> {
        self.child.try_wait().ok().flatten().and_then(|s| s.code())
    }

    /// Prints its logs to stderr (the test's output), headed by its name.
    pub fn dump_logs(&self) {
        eprintln!(
            "===== {} stderr ({}) =====",
            self.name,
            self.stderr_log.display()
        );
        eprintln!("{}", tail(&self.stderr(), 400));
        let stdout = self.stdout();
        if !stdout.trim().is_empty() {
            eprintln!("===== {} stdout =====", self.name);
            eprintln!("{}", tail(&stdout, 50));
        }
    }
}

impl Drop for GroupProcess {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// Sends `signal` to `target` (a pid, or `-pgid` for a group) with kill(1): the suite
/// forbids unsafe code, so no libc.
pub fn kill(target: &str, signal: &str) {
    let _ = Command::new("kill")
        .args([format!("-{signal}").as_str(), "--", target])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Every live descendant of `pid` as `(pid, command line)`, read from /proc.
pub fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut parents = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`: comm may hold spaces, so split after the last ')'.
            let Some(after) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
                continue;
            };
            let mut fields = after.split_whitespace();
            let state = fields.next().unwrap_or_default();
            let Some(ppid) = fields.next().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if state != "Z" {
                parents.push((child, ppid));
            }
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(child, ppid) in &parents {
            if ppid == parent {
                let cmdline = std::fs::read(format!("/proc/{child}/cmdline"))
                    .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
                    .unwrap_or_default();
                found.push((child, cmdline.trim().to_owned()));
                frontier.push(child);
            }
        }
    }
    found
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_a_line_logs_stderr_and_kills_the_whole_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo oops >&2; sleep 60 & echo READY=$!; wait"]);
        let mut p = GroupProcess::spawn("sh", cmd, dir.path());
        let grandchild: u32 = p
            .wait_for_line("READY=", Duration::from_secs(10))
            .await
            .parse()
            .expect("pid");
        assert!(
            descendants(p.pid())
                .iter()
                .any(|(pid, _)| *pid == grandchild),
            "the sleep is a descendant"
        );
        p.kill_group();
        assert!(!p.is_running());
        crate::wait::poll_until("the grandchild to die", crate::DEADLINE, || async {
            let stat =
                std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
            (stat.is_empty() || stat.contains(") Z")).then_some(())
        })
        .await;
        assert!(p.stderr().contains("oops"));
    }
}
