//! A budget's verdict: met only when the figure's whole interval is on the right side of
//! its bar, else not met with its reason, or not measured with why.

use crate::load::LoadResult;
use crate::report::mb;
use crate::stats::Interval;

/// One target.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What is measured against what.
    pub name: String,
    /// The figure(s).
    pub measured: String,
    /// The bar.
    pub bar: String,
    /// Met or not; `None` when this run did not measure it.
    pub met: Option<bool>,
    /// When not met: the measured reason.
    pub reason: String,
}

/// "≤ bar": met when the whole interval is under it.
pub(super) fn under(
    name: String,
    value: f64,
    ci: Option<Interval>,
    bar: f64,
    reason: String,
) -> Target {
    let (measured, met) = match ci {
        Some(ci) => {
            let met = ci.hi <= bar;
            // Two decimals can round an end over the bar onto it ("[0.99, 1.00]" not under
            // 1 ms): then three say which side it is on.
            let rounded_onto_bar = !met && format!("{:.2}", ci.hi) == format!("{bar:.2}");
            let measured = if rounded_onto_bar {
                format!("{value:.3} ms [{:.3}, {:.3}]", ci.lo, ci.hi)
            } else {
                format!("{value:.2} ms {}", ci.text())
            };
            (measured, met)
        }
        None => (format!("{value:.2} ms"), value <= bar),
    };
    target(name, measured, format!("≤ {bar} ms"), met, reason)
}

/// A budget this run did not measure, and why.
pub(super) fn unmeasured(name: String, why: String) -> Target {
    Target {
        name,
        measured: format!("not measured: {why}"),
        bar: String::new(),
        met: None,
        reason: String::new(),
    }
}

/// A budget with its figure, bar and verdict; the reason is kept only when it is not met.
pub(super) fn target(
    name: String,
    measured: String,
    bar: String,
    met: bool,
    reason: String,
) -> Target {
    Target {
        name,
        measured,
        bar,
        met: Some(met),
        reason: if met { String::new() } else { reason },
    }
}

/// Every response once: none lost, doubled or crossed.
pub(super) fn exactly_once(name: String, l: &LoadResult) -> Target {
    target(
        name,
        format!(
            "{} sent, {} answered once, {} lost, {} doubled, {} crossed",
            l.sent, l.answered, l.lost, l.doubled, l.crossed
        ),
        "all once, 0 lost / doubled / crossed".into(),
        l.sent == l.answered && l.lost + l.doubled + l.crossed == 0,
        "responses went missing or came twice (the run is BROKEN)".into(),
    )
}

/// A peak RSS of `bytes` against its limit of `max`, both shown in MB.
pub(super) fn peak_rss(name: String, bytes: u64, max: u64, reason: String) -> Target {
    target(
        name,
        format!("{:.1} MB", mb(bytes)),
        format!("≤ {} MB", mb(max)),
        bytes <= max,
        reason,
    )
}
