//! `target/bench/report.json`: every figure, the targets and the failures.

use serde_json::{Value, json};

use crate::breakdown::Breakdown;
use crate::load::LoadResult;
use crate::mapping::MappingFigure;
use crate::report::Report;
use crate::stats::{Percentiles, interval, percentiles};
use crate::sweep::Sweep;
use crate::targets::evaluate;

fn pct_json(p: &Percentiles) -> Value {
    json!({"n": p.n, "p50_ms": p.p50, "p95_ms": p.p95, "p99_ms": p.p99, "max_ms": p.max})
}

fn load_json(l: &LoadResult) -> Value {
    json!({"sent": l.sent, "answered_once": l.answered, "lost": l.lost, "doubled": l.doubled,
        "crossed": l.crossed, "respond_errors": l.respond_errors,
        "throughput_per_s": l.throughput, "open_seconds": l.open_seconds,
        "answer_to_agent": pct_json(&l.answer_to_agent),
        "kandev_peak_rss_bytes": l.kandev_peak_rss, "agentctl_peak_rss_bytes_max": l.agentctl_peak_rss,
        "agentctl_peak_rss_bytes_median": l.agentctl_median_peak_rss, "agentctl_processes": l.agentctls,
        "durability": l.durability})
}

/// Percentiles of `samples` with the bootstrap interval of their p99.
fn latency_json(samples: &[f64]) -> Value {
    let mut value = pct_json(&percentiles(samples));
    if let Some(ci) = interval(samples, 0.99) {
        value["p99_ci95_ms"] = json!([ci.lo, ci.hi]);
    }
    value
}

fn sweep_json(s: &Sweep) -> Value {
    json!({"sessions": s.sessions, "operators": s.operators, "think_ms": s.think_ms,
        "knee_per_s": s.knee().map(|p| p.offered),
        "past_knee_per_s": s.past_knee().map(|p| p.offered),
        "points": s.points.iter().map(|p| json!({
            "offered_per_s": p.offered, "answered_per_s": p.result.throughput,
            "sent": p.result.sent, "lost": p.result.lost, "doubled": p.result.doubled,
            "crossed": p.result.crossed, "holds": p.holds(),
            "answer_to_agent": latency_json(&p.result.samples),
            "time_to_visible": latency_json(&p.result.visible),
            "cpu": p.cpu.map(|c| json!({"busy": c.busy, "cpus": c.cpus,
                "kandev_cores": c.kandev_cores, "agentctl_cores": c.agentctl_cores,
                "other_cores": c.other_cores})),
        })).collect::<Vec<_>>(),
        "session_cold_start": latency_json(&s.cold_starts),
        "total": load_json(&s.total)})
}

fn or_error<T>(part: &Result<T, String>, f: impl FnOnce(&T) -> Value) -> Value {
    match part {
        Ok(v) => f(v),
        Err(err) => json!({"error": err}),
    }
}

impl Report {
    /// The machine-readable report.
    pub fn to_json(&self) -> Value {
        let mapping = or_error(&self.mapping, |figures| {
            json!(
                figures
                    .iter()
                    .map(MappingFigure::to_json)
                    .collect::<Vec<_>>()
            )
        });
        let baseline = or_error(&self.baseline, |b| pct_json(&percentiles(b)));
        let engines: serde_json::Map<String, Value> = self
            .engines
            .iter()
            .map(|e| {
                let value = json!({
                    "durability": e.durability(),
                    "round_trip": or_error(&e.round_trip, |r| latency_json(&r.samples)),
                    "time_to_visible": or_error(&e.round_trip, |r| latency_json(&r.visible)),
                    "round_trip_64_questions": or_error(&e.large_form, |r| json!({
                        "round_trip": latency_json(&r.samples), "time_to_visible": latency_json(&r.visible)})),
                    "round_trip_ask_user_question": or_error(&e.tool_call, |r| json!({
                        "round_trip": latency_json(&r.samples), "time_to_visible": latency_json(&r.visible)})),
                    "breakdown": or_error(&e.breakdown, Breakdown::to_json),
                    "load_sweep": or_error(&e.load, sweep_json),
                });
                (e.engine.key().to_owned(), value)
            })
            .collect();
        let scale: Vec<Value> = self
            .scale
            .iter()
            .map(|p| {
                json!({"sessions": p.sessions, "elicitations_per_session": self.scale_per_session, "rounds": p.rounds,
                "time_to_visible": or_error(&p.result, |l| latency_json(&l.visible)),
                "result": or_error(&p.result, load_json)})
            })
            .collect();
        let replicas: Vec<Value> = self
            .replicas
            .iter()
            .map(|p| json!({"replicas": p.replicas, "sweep": or_error(&p.result, sweep_json)}))
            .collect();
        let targets: Vec<Value> = evaluate(self)
            .iter()
            .map(|t| json!({"target": t.name, "measured": t.measured, "bar": t.bar, "met": t.met, "reason": t.reason}))
            .collect();
        json!({
            "mode": self.meta.mode,
            "binaries": {"profile": self.meta.profile, "dir": format!("target/{}", self.meta.profile)},
            "commit": self.meta.commit, "date": self.meta.date,
            "machine": {"cpus": self.meta.cpus},
            "storage": or_error(&self.storage, |s| json!({"dir": s.dir, "fs_type": s.fs_type,
                "fsync_4k": pct_json(&s.fsync), "sqlite_statement_busy": pct_json(&s.statement_busy),
                "sqlite_statement_woken": pct_json(&s.statement_woken)})),
            "mapping": mapping,
            "round_trip": {"n": self.rt_n, "turns": self.rt_rounds, "warmup_discarded_per_turn": self.rt_warmup,
                "baseline_agentctl_direct": baseline},
            "breakdown_round_trips": self.breakdown_n,
            "scale_operator_clients": self.shape.operators,
            "engines": engines,
            "scale": scale, "scale_skipped": self.scale_skipped,
            "replicas": replicas, "replicas_skipped": self.replicas_skipped,
            "operators": or_error(&self.crowd, |c| json!({"sockets": c.plan.sockets,
                "sessions": c.plan.sessions, "rate_per_s": c.plan.rate, "elicitations": c.plan.elicitations,
                "time_to_visible": latency_json(&c.visible), "unseen": c.unseen,
                "slow_reader": {"frames": c.slow.frames, "resyncs": c.slow.resyncs},
                "result": load_json(&c.result)})),
            "streaming": or_error(&self.streaming, |s| json!({"sessions": s.plan.sessions,
                "chunks_per_s_per_session": s.plan.chunks_per_s, "seconds": s.plan.seconds,
                "elicitations_per_s": s.plan.rate,
                "round_trip_idle": latency_json(&s.idle), "round_trip_during": latency_json(&s.during),
                "time_to_visible_idle": latency_json(&s.idle_visible),
                "time_to_visible_during": latency_json(&s.during_visible),
                "last_chunk_visible": latency_json(&s.last_chunk_visible), "unseen": s.unseen,
                "result": load_json(&s.result)})),
            "soak": or_error(&self.soak, |s| json!({"window_s": s.plan.window.as_secs_f64(),
                "rate_per_s": s.plan.rate, "windows": s.windows.iter().map(|w| json!({
                    "answer_to_agent": pct_json(&percentiles(&w.samples)),
                    "time_to_visible": pct_json(&percentiles(&w.visible)), "kandev_rss_bytes": w.rss,
                    "kandev_threads": w.threads, "database_files_open": w.database_files,
                    "db_bytes": w.db_bytes, "wal_bytes": w.wal_bytes,
                    "kandev_cores": w.cpu.map(|c| c.kandev_cores)})).collect::<Vec<_>>(),
                "result": load_json(&s.total)})),
            "targets": targets,
            "failures": self.failures(),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::load::LoadResult;
    use crate::report::tests::sample;

    #[test]
    fn figures_targets_and_durability_are_in_the_json() {
        let json = sample(LoadResult {
            sent: 2,
            answered: 2,
            samples: vec![1.0, 2.0],
            visible: vec![3.0, 4.0],
            throughput: 100.0,
            ..LoadResult::default()
        })
        .to_json();
        assert_eq!(json["mapping"][0]["ratio"], 3.0);
        let p50 = json["engines"]["sqlite"]["round_trip"]["p50_ms"].as_f64();
        assert!(p50.is_some_and(|v| (v - 11.0).abs() < 0.02), "{p50:?}");
        let visible = json["engines"]["sqlite"]["time_to_visible"]["p50_ms"].as_f64();
        assert!(
            visible.is_some_and(|v| (v - 1.1).abs() < 0.002),
            "{visible:?}"
        );
        assert!(json["engines"]["sqlite"]["round_trip"]["p99_ci95_ms"].is_array());
        assert_eq!(json["engines"]["sqlite"]["load_sweep"]["knee_per_s"], 100.0);
        assert_eq!(
            json["engines"]["sqlite"]["load_sweep"]["points"][0]["sent"],
            2
        );
        assert_eq!(json["storage"]["fs_type"], "ext4");
        assert_eq!(
            json["engines"]["postgres"]["round_trip_64_questions"]["round_trip"]["n"],
            2
        );
        assert_eq!(json["operators"]["slow_reader"]["resyncs"], 1);
        assert_eq!(json["streaming"]["round_trip_during"]["n"], 2);
        assert_eq!(json["streaming"]["time_to_visible_during"]["n"], 2);
        assert_eq!(json["scale"][0]["time_to_visible"]["n"], 2);
        assert_eq!(json["operators"]["time_to_visible"]["n"], 4);
        assert_eq!(json["replicas"][1]["sweep"]["knee_per_s"], 100.0);
        assert_eq!(json["engines"]["postgres"]["durability"], "engine=postgres");
        assert!(json["targets"].as_array().is_some_and(|t| !t.is_empty()));
        assert_eq!(json["failures"], serde_json::json!([]));
    }
}
