//! `probe-claude VERSION`: the §K A/B against a published claude-agent-acp version
//! (installed into `target/claude-bridge/VERSION` when missing), printed as a one-screen
//! verdict. Exit code 0 on PASS, 1 on FAIL, 2 when the probe could not run.
//! `just probe-claude VERSION` builds and runs it.

use std::process::ExitCode;

mod probe;

use kandev_testkit::claude::bridge::{Bridge, node};

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [version] = args.as_slice() else {
        eprintln!(
            "usage: probe-claude VERSION   (e.g. 0.101.0; `npm view @agentclientprotocol/claude-agent-acp versions`)"
        );
        return ExitCode::from(2);
    };
    let fail = |what: &str, err: &dyn std::fmt::Display| {
        eprintln!("probe-claude: {what}: {err}");
        ExitCode::from(2)
    };
    eprintln!(
        "probe-claude: installing claude-agent-acp {version} (cached under target/claude-bridge)…"
    );
    let bridge = match Bridge::ensure(version) {
        Ok(bridge) => bridge,
        Err(err) => return fail("install", &err),
    };
    let node = match node() {
        Ok(node) => node,
        Err(err) => return fail("node", &err),
    };
    let off = match probe::run(&bridge, &node, false).await {
        Ok(run) => run,
        Err(err) => return fail("flag-off run", &err),
    };
    let on = match probe::run(&bridge, &node, true).await {
        Ok(run) => run,
        Err(err) => return fail("flag-on run", &err),
    };
    let (text, passed) = probe::verdict(&off, &on);
    print!("{text}");
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
