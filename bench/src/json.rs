//! `target/bench/report.json`: every figure, the targets and the failures.

use serde_json::{Value, json};

use crate::breakdown::Breakdown;
use crate::load::LoadResult;
use crate::mapping::MappingFigure;
use crate::report::Report;
use crate::stats::{Percentiles, percentiles};
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
                    "round_trip": or_error(&e.round_trip, |r| pct_json(&percentiles(&r.samples))),
                    "breakdown": or_error(&e.breakdown, Breakdown::to_json),
                    "load": or_error(&e.load, load_json),
                });
                (e.engine.key().to_owned(), value)
            })
            .collect();
        let scale: Vec<Value> = self
            .scale
            .iter()
            .map(|p| {
                json!({"sessions": p.sessions, "elicitations_per_session": self.scale_per_session, "rounds": p.rounds,
                "result": or_error(&p.result, load_json)})
            })
            .collect();
        let one = self
            .replicas
            .iter()
            .find(|p| p.replicas == 1)
            .and_then(|p| p.result.as_ref().ok());
        let replicas: Vec<Value> = self
            .replicas
            .iter()
            .map(|p| {
                let ratio = |f: fn(&LoadResult) -> f64| match (one, p.result.as_ref().ok()) {
                    (Some(one), Some(this)) if f(one) > 0.0 => json!(f(this) / f(one)),
                    _ => Value::Null,
                };
                json!({"replicas": p.replicas, "result": or_error(&p.result, load_json),
                    "p50_ratio_to_one": ratio(|l| l.answer_to_agent.p50),
                    "p99_ratio_to_one": ratio(|l| l.answer_to_agent.p99),
                    "throughput_ratio_to_one": ratio(|l| l.throughput)})
            })
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
            "mapping": mapping,
            "round_trip": {"n": self.rt_n, "turns": self.rt_rounds, "warmup_discarded_per_turn": self.rt_warmup,
                "baseline_agentctl_direct": baseline},
            "breakdown_round_trips": self.breakdown_n,
            "load_shape": {"sessions": self.shape.sessions, "elicitations_per_session": self.shape.per_session,
                "operator_clients": self.shape.operators},
            "engines": engines,
            "scale": scale, "scale_skipped": self.scale_skipped,
            "replicas": replicas, "replicas_skipped": self.replicas_skipped,
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
            ..LoadResult::default()
        })
        .to_json();
        assert_eq!(json["mapping"][0]["ratio"], 3.0);
        assert_eq!(json["engines"]["sqlite"]["round_trip"]["p50_ms"], 11.0);
        assert_eq!(json["engines"]["postgres"]["durability"], "engine=postgres");
        assert!(json["targets"].as_array().is_some_and(|t| !t.is_empty()));
        assert_eq!(json["failures"], serde_json::json!([]));
    }
}
