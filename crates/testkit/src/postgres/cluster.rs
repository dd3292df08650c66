//! [`Cluster`]: one PostgreSQL server in a temporary directory.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::Connection;

/// Why no cluster could be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unavailable {}

/// A running server. Its supervisor shell stops it and removes its directory when this
/// process exits (its stdin, a pipe from us, closes), when [`Cluster::stop`] is called,
/// or when the `Cluster` is dropped.
#[derive(Debug)]
pub struct Cluster {
    port: u16,
    supervisor: Child,
}

const READY_WITHIN: Duration = Duration::from_secs(30);

/// What a commit survives on a [`Cluster`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `fsync`, `synchronous_commit` and `full_page_writes` off: tests, which never
    /// survive a crash anyway.
    Fast,
    /// PostgreSQL's defaults (all three on): a committed transaction is on disk, as in a
    /// deployment. What the bench measures.
    Durable,
}

impl Durability {
    fn server_options(self) -> &'static str {
        match self {
            Self::Fast => "-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            Self::Durable => "-c fsync=on -c synchronous_commit=on -c full_page_writes=on",
        }
    }
}

impl Cluster {
    /// Finds the binaries, runs `initdb` and starts a [`Durability::Fast`] server; waits
    /// until it answers.
    pub fn start() -> Result<Self, Unavailable> {
        Self::start_with(Durability::Fast)
    }

    /// Like [`Cluster::start`], with the given durability.
    pub fn start_with(durability: Durability) -> Result<Self, Unavailable> {
        let bin = binaries()?;
        let dir = tempfile::Builder::new()
            .prefix("kandev-pg-")
            .tempdir()
            .map_err(|e| Unavailable(format!("cannot make a temporary directory: {e}")))?
            .keep();
        let data = dir.join("data");
        let runas = RunAs::detect()?;
        runas.prepare(&dir)?;
        let initdb = runas
            .command(&bin.join("initdb"))
            .args([
                "--auth=trust",
                "--username=postgres",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .output()
            .map_err(|e| Unavailable(format!("cannot run initdb: {e}")))?;
        if !initdb.status.success() {
            return Err(Unavailable(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&initdb.stderr).trim()
            )));
        }
        let port = free_port()?;
        let postgres = runas.command_line(&bin.join("postgres"));
        let script = format!(
            "{postgres} -D '{data}' -p {port} -k '{dir}' -c listen_addresses=127.0.0.1 \
             {durability} -c max_connections=400 \
             >'{dir}/postgres.log' 2>&1 & pid=$!; \
             read _ignored; kill -INT $pid; wait $pid; rm -rf '{dir}'",
            data = data.display(),
            dir = dir.display(),
            durability = durability.server_options(),
        );
        let mut supervisor = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Unavailable(format!("cannot start postgres: {e}")))?;
        let cluster_log = dir.join("postgres.log");
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if accepts(&bin, port) {
                break;
            }
            if let Ok(Some(status)) = supervisor.try_wait() {
                return Err(Unavailable(format!(
                    "postgres exited ({status}): {}",
                    std::fs::read_to_string(&cluster_log)
                        .unwrap_or_default()
                        .trim()
                )));
            }
            if Instant::now() > deadline {
                if let Some(stdin) = supervisor.stdin.as_mut() {
                    let _ = stdin.write_all(b"\n");
                }
                return Err(Unavailable(format!(
                    "postgres did not accept connections within {READY_WITHIN:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self { port, supervisor })
    }

    /// Stops the server (a fast shutdown: clients are disconnected at once) and removes
    /// its directory; returns once it is gone. Its port then refuses connections. A test
    /// that stops a server should own it: [`crate::postgres::private_cluster`], not the shared one.
    pub fn stop(&mut self) {
        if let Some(mut stdin) = self.supervisor.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let _ = self.supervisor.wait();
    }

    /// Whether the server is still running (not [`Cluster::stop`]ped, not crashed).
    pub fn is_running(&mut self) -> bool {
        matches!(self.supervisor.try_wait(), Ok(None))
    }

    /// The server's loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates a fresh database and returns its URL.
    pub async fn create_database(&self) -> Result<String, sqlx::Error> {
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect(&self.url("postgres")).await?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await?;
        admin.close().await?;
        Ok(self.url(&name))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether the server accepts connections yet (`pg_isready`; TCP opens before it is ready).
fn accepts(bin: &Path, port: u16) -> bool {
    Command::new(bin.join("pg_isready"))
        .args([
            "-q",
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-p",
            &port.to_string(),
        ])
        .status()
        .is_ok_and(|s| s.success())
}

fn free_port() -> Result<u16, Unavailable> {
    TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Unavailable(format!("no free loopback port: {e}")))
}

/// The directory holding `initdb` and `postgres`: on the PATH, else the newest of
/// Debian's `/usr/lib/postgresql/<major>/bin`.
fn binaries() -> Result<PathBuf, Unavailable> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|dir| dir.join("initdb").is_file() && dir.join("postgres").is_file());
    if let Some(dir) = on_path {
        // A symlink on the PATH (Debian's /usr/local/bin/initdb) leads to the real bin dir,
        // which also holds pg_isready.
        let real = std::fs::canonicalize(dir.join("initdb"))
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or(dir);
        return Ok(real);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((major, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        Unavailable(
            "no initdb/postgres on PATH or under /usr/lib/postgresql (apt-get install postgresql)"
                .into(),
        )
    })
}

/// Become `postgres` and exec (no intermediate process that would swallow signals).
const SETPRIV: [&str; 3] = ["--reuid=postgres", "--regid=postgres", "--init-groups"];

/// Who runs the server: ourselves, or — as root, which PostgreSQL refuses — `postgres`.
enum RunAs {
    Me,
    Postgres { uid: u32, gid: u32 },
}

impl RunAs {
    fn detect() -> Result<Self, Unavailable> {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        if !root {
            return Ok(Self::Me);
        }
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        passwd
            .lines()
            .find_map(|line| {
                let f: Vec<&str> = line.split(':').collect();
                (f.first() == Some(&"postgres") && f.len() > 3)
                    .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
                    .flatten()
            })
            .map(|(uid, gid)| Self::Postgres { uid, gid })
            .ok_or_else(|| Unavailable("running as root and there is no `postgres` user".into()))
    }

    fn prepare(&self, dir: &Path) -> Result<(), Unavailable> {
        if let Self::Postgres { uid, gid } = self {
            std::os::unix::fs::chown(dir, Some(*uid), Some(*gid)).map_err(|e| {
                Unavailable(format!("cannot hand {} to postgres: {e}", dir.display()))
            })?;
        }
        Ok(())
    }

    fn command(&self, program: &Path) -> Command {
        match self {
            Self::Me => Command::new(program),
            Self::Postgres { .. } => {
                let mut c = Command::new("setpriv");
                c.args(SETPRIV).arg(program);
                c
            }
        }
    }

    fn command_line(&self, program: &Path) -> String {
        match self {
            Self::Me => format!("'{}'", program.display()),
            // setpriv execs the program itself, so the shell's `$!` is the server's pid.
            Self::Postgres { .. } => {
                format!("setpriv {} '{}'", SETPRIV.join(" "), program.display())
            }
        }
    }
}
