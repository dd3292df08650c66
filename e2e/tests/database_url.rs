//! A PostgreSQL `database_url` that cannot be used stops start-up with one line that
//! names the URL (password masked) and the cause, and kandev exits 1.

use std::process::Output;

use kandev_testkit::kandev_command;

fn serve_with(database_url: &str) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    kandev_command()
        .arg("serve")
        .current_dir(dir.path())
        .env("KANDEV_LISTEN", "127.0.0.1:0")
        .env("KANDEV_DATABASE_URL", database_url)
        .output()
        .expect("run kandev")
}

fn one_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("kandev: "))
        .collect();
    assert_eq!(lines.len(), 1, "one error line: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    lines[0].to_owned()
}

#[test]
fn a_server_that_is_not_there_is_named_with_the_password_masked() {
    // A port nothing listens on: bound without listening and kept so for the test, so
    // no process started meanwhile (a test's PostgreSQL cluster) can take it.
    let reserved = tokio::net::TcpSocket::new_v4().expect("socket");
    reserved
        .bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let port = reserved.local_addr().expect("addr").port();
    let line = one_line(&serve_with(&format!(
        "postgres://kandev:s3cret@127.0.0.1:{port}/kandev"
    )));
    assert!(
        line.starts_with(&format!(
            "kandev: cannot open database postgres://kandev:***@127.0.0.1:{port}/kandev: the server cannot be reached"
        )),
        "{line}"
    );
    assert!(!line.contains("s3cret"), "{line}");
}

#[test]
#[ignore = "needs PostgreSQL (Debian's postgresql); `just test` runs it"]
fn a_database_that_does_not_exist_is_named_in_the_servers_words() {
    let cluster = kandev_testkit::postgres::shared();
    let url = cluster.url("no_such_database");
    let line = one_line(&serve_with(&url));
    assert_eq!(
        line,
        format!("kandev: cannot open database {url}: database \"no_such_database\" does not exist")
    );
}
