//! `kandev migrate-db`: copies every record of an SQLite database into an empty
//! PostgreSQL one, for a deployment that outgrows the embedded file.
//!
//! Both ends are migrated first, so their schemas are the same tables and columns; the
//! copy then reads each table of the source in dependency order and inserts each row in
//! one PostgreSQL transaction, casting every value from SQLite's storage (RFC 3339 text,
//! JSON text, 0/1) to the target column's type. Nothing is written unless everything is:
//! a failure rolls the whole copy back. A table the copy does not know stops it before
//! the first write, so a new table is a conscious addition here, never silently left
//! behind.

use std::collections::BTreeSet;

use sqlx::Row;

use crate::store::postgres::PostgresDb;
use crate::store::sqlite::SqliteDb;
use crate::store::{DatabaseOptions, Engine, OpenError, redact_url};

/// Every table, parents before children (the order the foreign keys need).
const TABLES: &[&str] = &[
    "tasks",
    "sessions",
    "messages",
    "clarifications",
    "ask_user_question_calls",
    "runtime_flag_overrides",
    "notifications",
];

/// Tables left behind on purpose: a lease belongs to the process that held it; the kandev
/// on the new database claims its sessions afresh.
/// The webhook outbox and the used answer links are the old deployment's traffic, bound to
/// its records' deadlines.
const NOT_COPIED: &[&str] = &["session_leases", "webhook_deliveries", "answer_link_uses"];

/// Columns the target's triggers derive from other rows, `(table, column)`, left behind:
/// copied too, they would count twice (`sessions.pending` starts at 0 and rises as each
/// pending clarification is copied; docs/decisions/0021).
const DERIVED: &[(&str, &str)] = &[("sessions", "pending")];

/// Why a copy did not happen. Nothing was written to the target.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// `--from` must be SQLite and `--to` PostgreSQL.
    #[error("migrate-db copies from sqlite: to postgres://; {0}")]
    Direction(String),
    /// One end could not be opened or migrated.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The target already holds records.
    #[error(
        "the target already holds {rows} row(s) in `{table}`: migrate-db copies into an empty database only"
    )]
    NotEmpty {
        /// The first non-empty table.
        table: String,
        /// Its row count.
        rows: i64,
    },
    /// The source has a table this copy does not know.
    #[error("the source holds table `{0}`, which migrate-db does not know how to copy")]
    UnknownTable(String),
    /// A column exists on one side only (the two schemas are at different versions).
    #[error("table `{table}`: column `{column}` exists only in the {side}")]
    Schema {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// `source` or `target`.
        side: &'static str,
    },
    /// Reading or writing failed.
    #[error("copying `{table}`: {message}")]
    Copy {
        /// The table being copied.
        table: String,
        /// The driver's complaint.
        message: String,
    },
}

/// What was copied: `(table, rows)` in copy order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferReport(pub Vec<(String, u64)>);

impl std::fmt::Display for TransferReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(table, rows)| format!("{rows} {table}"))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

/// How a target column is read from SQLite and bound for PostgreSQL.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Integer,
    Boolean,
    /// Read as text, cast in SQL to the target type (timestamps, JSON, text).
    Text,
}

struct TargetColumn {
    name: String,
    sql_type: String,
    kind: Kind,
}

/// Copies every record of the SQLite database `from` into the empty PostgreSQL
/// database `to` (both are migrated to the current schema first).
pub async fn sqlite_to_postgres(
    from: &str,
    to: &str,
    options: &DatabaseOptions,
) -> Result<TransferReport, TransferError> {
    if Engine::of(from) != Some(Engine::Sqlite) {
        return Err(TransferError::Direction(format!(
            "--from is {}",
            redact_url(from)
        )));
    }
    if Engine::of(to) != Some(Engine::Postgres) {
        return Err(TransferError::Direction(format!(
            "--to is {}",
            redact_url(to)
        )));
    }
    let source = SqliteDb::open(from).await?;
    let target = PostgresDb::open(to, options).await?;
    check_tables(&source).await?;
    check_empty(&target).await?;

    let mut tx = target.pool().begin().await.map_err(copy_error("begin"))?;
    let mut report = Vec::new();
    for table in TABLES {
        let columns = target_columns(&target, table).await?;
        check_columns(&source, table, &columns).await?;
        let copied: Vec<TargetColumn> = columns
            .into_iter()
            .filter(|c| !DERIVED.contains(&(*table, c.name.as_str())))
            .collect();
        let rows = copy_table(&source, &mut tx, table, &copied).await?;
        report.push(((*table).to_owned(), rows));
    }
    tx.commit().await.map_err(copy_error("commit"))?;
    source.pool().close().await;
    target.pool().close().await;
    Ok(TransferReport(report))
}

fn copy_error(table: &str) -> impl Fn(sqlx::Error) -> TransferError + '_ {
    move |err| TransferError::Copy {
        table: table.to_owned(),
        message: err.to_string(),
    }
}

async fn check_tables(source: &SqliteDb) -> Result<(), TransferError> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND name <> '_sqlx_migrations' ORDER BY name",
    )
    .fetch_all(source.pool())
    .await
    .map_err(copy_error("sqlite_master"))?;
    let known = |name: &str| TABLES.contains(&name) || NOT_COPIED.contains(&name);
    match names.into_iter().find(|name| !known(name)) {
        Some(unknown) => Err(TransferError::UnknownTable(unknown)),
        None => Ok(()),
    }
}

async fn check_empty(target: &PostgresDb) -> Result<(), TransferError> {
    for table in TABLES {
        let rows: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(target.pool())
            .await
            .map_err(copy_error(table))?;
        if rows > 0 {
            return Err(TransferError::NotEmpty {
                table: (*table).to_owned(),
                rows,
            });
        }
    }
    Ok(())
}

async fn target_columns(
    target: &PostgresDb,
    table: &str,
) -> Result<Vec<TargetColumn>, TransferError> {
    let rows = sqlx::query(
        "SELECT column_name::text AS name, data_type::text AS sql_type \
         FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
    )
    .bind(table)
    .fetch_all(target.pool())
    .await
    .map_err(copy_error(table))?;
    rows.iter()
        .map(|row| {
            let name: String = row.try_get("name").map_err(copy_error(table))?;
            let sql_type: String = row.try_get("sql_type").map_err(copy_error(table))?;
            let kind = match sql_type.as_str() {
                "bigint" | "integer" | "smallint" => Kind::Integer,
                "boolean" => Kind::Boolean,
                _ => Kind::Text,
            };
            Ok(TargetColumn {
                name,
                sql_type,
                kind,
            })
        })
        .collect()
}

async fn check_columns(
    source: &SqliteDb,
    table: &str,
    target: &[TargetColumn],
) -> Result<(), TransferError> {
    let in_source: BTreeSet<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info($1)")
        .bind(table)
        .fetch_all(source.pool())
        .await
        .map_err(copy_error(table))?
        .into_iter()
        .collect();
    let in_target: BTreeSet<String> = target.iter().map(|c| c.name.clone()).collect();
    let mismatch = |column: &String, side| TransferError::Schema {
        table: table.to_owned(),
        column: column.clone(),
        side,
    };
    if let Some(column) = in_source.difference(&in_target).next() {
        return Err(mismatch(column, "source"));
    }
    if let Some(column) = in_target.difference(&in_source).next() {
        return Err(mismatch(column, "target"));
    }
    Ok(())
}

async fn copy_table(
    source: &SqliteDb,
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    table: &str,
    columns: &[TargetColumn],
) -> Result<u64, TransferError> {
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    let select = format!("SELECT {} FROM {table} ORDER BY rowid", names.join(", "));
    let values: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| match c.kind {
            Kind::Text => format!("CAST(${} AS {})", i + 1, c.sql_type),
            Kind::Integer | Kind::Boolean => format!("${}", i + 1),
        })
        .collect();
    let insert = format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        names.join(", "),
        values.join(", ")
    );
    let rows = sqlx::query(&select)
        .fetch_all(source.pool())
        .await
        .map_err(copy_error(table))?;
    for row in &rows {
        let mut query = sqlx::query(&insert);
        for column in columns {
            let name = column.name.as_str();
            let read = copy_error(table);
            query = match column.kind {
                Kind::Integer => query.bind(row.try_get::<Option<i64>, _>(name).map_err(read)?),
                Kind::Boolean => query.bind(row.try_get::<Option<bool>, _>(name).map_err(read)?),
                Kind::Text => query.bind(row.try_get::<Option<String>, _>(name).map_err(read)?),
            };
        }
        query.execute(&mut **tx).await.map_err(copy_error(table))?;
    }
    Ok(rows.len() as u64)
}
