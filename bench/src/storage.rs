//! Where the bench's databases live, and what a commit costs there: the file system of
//! the temporary directory (kandev's SQLite file and the PostgreSQL cluster are both made
//! under it) and the latency of a 4 KiB write plus `fdatasync` in it. A durable commit
//! waits for at least one such sync, so this is the floor under every database figure.
//! PostgreSQL on `tmpfs` would measure memory, not a deployment: the bench refuses it.
//!
//! It also times one SQLite statement through sqlx there, back to back and after a pause
//! as long as one question's round trip: sqlx runs each SQLite connection on a thread of
//! its own, so every statement kandev sends crosses to that thread and back, and on this
//! VM a thread woken from idle costs several times one kept busy. One question at a time
//! pays the woken figure at every hop.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::stats::{Percentiles, percentiles};

/// Syncs timed per probe.
const SYNCS: usize = 200;

/// Statements timed per probe, each way.
const STATEMENTS: usize = 500;

/// The pause before a woken statement: about one question's round trip, in which kandev's
/// threads have nothing to do.
pub const PAUSE: std::time::Duration = std::time::Duration::from_micros(1500);

/// The databases' directory, as measured.
#[derive(Debug, Clone)]
pub struct Storage {
    /// The directory.
    pub dir: PathBuf,
    /// Its file system type (`/proc/self/mountinfo`), `unknown` when not found.
    pub fs_type: String,
    /// 4 KiB write + `fdatasync`, ms.
    pub fsync: Percentiles,
    /// `SELECT 1` through sqlx on a SQLite file there, back to back, ms.
    pub statement_busy: Percentiles,
    /// The same after a pause of [`PAUSE`], ms.
    pub statement_woken: Percentiles,
}

impl Storage {
    /// Whether PostgreSQL may be measured here (not on memory).
    pub fn refuses_postgres(&self) -> Option<String> {
        (self.fs_type == "tmpfs" || self.fs_type == "ramfs").then(|| {
            format!(
                "PostgreSQL refused: {} is on {}, where a commit never reaches a disk; set TMPDIR to a directory on a disk",
                self.dir.display(),
                self.fs_type
            )
        })
    }
}

/// The file system type of the longest mount point holding `path`, from mountinfo text
/// (fields: id, parent, dev, root, mount point, options, optional fields…, `-`, type, …).
fn fs_type_in(mountinfo: &str, path: &Path) -> Option<String> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let mount = Path::new(fields.get(4)?);
            let dash = fields.iter().position(|f| *f == "-")?;
            let fs = fields.get(dash + 1)?;
            path.starts_with(mount)
                .then(|| (mount.as_os_str().len(), (*fs).to_owned()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fs)| fs)
}

/// Measures `dir`.
pub fn probe(dir: &Path) -> Result<Storage, String> {
    let dir = dir
        .canonicalize()
        .map_err(|err| format!("storage: {}: {err}", dir.display()))?;
    let fs_type = std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|m| fs_type_in(&m, &dir))
        .unwrap_or_else(|| "unknown".into());
    let mut file = tempfile::tempfile_in(&dir).map_err(|err| format!("storage: {err}"))?;
    let block = [0x6bu8; 4096];
    let mut samples = Vec::with_capacity(SYNCS);
    for _ in 0..SYNCS {
        let start = std::time::Instant::now();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.write_all(&block))
            .and_then(|()| file.sync_data())
            .map_err(|err| format!("storage: fdatasync: {err}"))?;
        samples.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let (statement_busy, statement_woken) = statements(&dir)?;
    Ok(Storage {
        dir,
        fs_type,
        fsync: percentiles(&samples),
        statement_busy,
        statement_woken,
    })
}

/// `SELECT 1` on one sqlx SQLite connection to a file in `dir`: back to back, then each
/// after [`PAUSE`]. In a task on a runtime of its own shaped like kandev's (two worker
/// threads): how a runtime's threads wait for work is part of what this measures, and the
/// bench's own runtime is not kandev's.
fn statements(dir: &Path) -> Result<(Percentiles, Percentiles), String> {
    let dir = dir.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|err| format!("storage: runtime: {err}"))?;
        let probe = runtime.spawn(time_statements(dir));
        runtime
            .block_on(probe)
            .map_err(|err| format!("storage: the statement probe: {err}"))?
    })
    .join()
    .map_err(|_| "storage: the statement probe panicked".to_owned())?
}

async fn time_statements(dir: PathBuf) -> Result<(Percentiles, Percentiles), String> {
    use sqlx::Connection;
    let err = |err: sqlx::Error| format!("storage: SQLite statement: {err}");
    let file = tempfile::tempdir_in(&dir).map_err(|err| format!("storage: {err}"))?;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(file.path().join("probe.db"))
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .map_err(err)?;
    let mut time = async |pause: Option<std::time::Duration>| {
        let mut samples = Vec::with_capacity(STATEMENTS);
        for _ in 0..STATEMENTS {
            if let Some(pause) = pause {
                tokio::time::sleep(pause).await;
            }
            let start = std::time::Instant::now();
            sqlx::query("SELECT 1")
                .fetch_one(&mut conn)
                .await
                .map_err(err)?;
            samples.push(start.elapsed().as_secs_f64() * 1e3);
        }
        Ok::<_, String>(percentiles(&samples))
    };
    let busy = time(None).await?;
    let woken = time(Some(PAUSE)).await?;
    conn.close().await.map_err(err)?;
    Ok((busy, woken))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 252:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:26 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw
31 22 0:27 / /tmpx rw - xfs /dev/vdb rw
";

    #[test]
    fn the_longest_mount_point_names_the_file_system() {
        let at = |p: &str| fs_type_in(MOUNTINFO, Path::new(p));
        assert_eq!(at("/tmp/kandev-pg-1").as_deref(), Some("tmpfs"));
        assert_eq!(
            at("/tmpx/a").as_deref(),
            Some("xfs"),
            "not a prefix of /tmp"
        );
        assert_eq!(at("/work").as_deref(), Some("ext4"));
    }

    #[test]
    fn tmpfs_is_refused_for_postgres_and_a_disk_is_not() {
        let storage = |fs: &str| Storage {
            dir: "/tmp".into(),
            fs_type: fs.into(),
            fsync: Percentiles::default(),
            statement_busy: Percentiles::default(),
            statement_woken: Percentiles::default(),
        };
        assert!(storage("tmpfs").refuses_postgres().is_some());
        assert!(storage("ext4").refuses_postgres().is_none());
    }

    #[test]
    fn a_probe_times_real_syncs_and_statements() {
        let dir = tempfile::tempdir().expect("dir");
        let s = probe(dir.path()).expect("probe");
        assert_eq!(s.fsync.n, SYNCS);
        assert!(s.fsync.p50 > 0.0 && s.fs_type != "unknown", "{s:?}");
        assert_eq!(
            (s.statement_busy.n, s.statement_woken.n),
            (STATEMENTS, STATEMENTS)
        );
        assert!(
            s.statement_busy.p50 > 0.0 && s.statement_woken.p50 > 0.0,
            "{s:?}"
        );
    }
}
