//! `acp-tap --log FILE -- PROGRAM [ARGS…]`: runs an ACP agent and relays its stdio
//! unchanged, writing every line it receives and sends to FILE in the mock agent's
//! `MOCK_AGENT_LOG` format (`{"dir": "recv"|"send", "frame": …}`), so the suite can read
//! the real bridge's wire the way it reads the mock agent's. stderr is inherited; the exit
//! code is the agent's. A line that is not JSON is logged as a string.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};

fn usage() -> ExitCode {
    eprintln!("usage: acp-tap --log FILE -- PROGRAM [ARGS...]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some("--log"), Some(log), Some("--")) = (
        args.first().map(String::as_str),
        args.get(1),
        args.get(2).map(String::as_str),
    ) else {
        return usage();
    };
    let Some((program, program_args)) = args[3..].split_first() else {
        return usage();
    };
    let log = match File::create(log) {
        Ok(file) => Arc::new(Mutex::new(BufWriter::new(file))),
        Err(err) => {
            eprintln!("acp-tap: cannot create {log}: {err}");
            return ExitCode::from(2);
        }
    };
    let mut child = match Command::new(program)
        .args(program_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(child) => child,
        Err(err) => {
            eprintln!("acp-tap: cannot start {program}: {err}");
            return ExitCode::from(2);
        }
    };
    let (Some(mut agent_in), Some(agent_out)) = (child.stdin.take(), child.stdout.take()) else {
        eprintln!("acp-tap: the agent's pipes are missing");
        return ExitCode::from(2);
    };
    let recv_log = Arc::clone(&log);
    // Client → agent. Our stdin closing closes the agent's, which is how it is stopped.
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            record(&recv_log, "recv", &line);
            if writeln!(agent_in, "{line}")
                .and_then(|()| agent_in.flush())
                .is_err()
            {
                break;
            }
        }
    });
    // Agent → client, on this thread until the agent closes its stdout.
    let mut out = std::io::stdout().lock();
    for line in BufReader::new(agent_out).lines() {
        let Ok(line) = line else { break };
        record(&log, "send", &line);
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    match child.wait() {
        Ok(status) => ExitCode::from(
            status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(1),
        ),
        Err(err) => {
            eprintln!("acp-tap: cannot wait for the agent: {err}");
            ExitCode::from(1)
        }
    }
}

fn record(log: &Mutex<BufWriter<File>>, dir: &str, line: &str) {
    let frame = serde_json::from_str::<serde_json::Value>(line)
        .unwrap_or_else(|_| serde_json::Value::String(line.to_owned()));
    let entry = serde_json::json!({"dir": dir, "frame": frame});
    let mut log = log
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Flushed per line: the suite reads the file while the agent runs.
    let _ = writeln!(log, "{entry}").and_then(|()| log.flush());
}
