//! Latency statistics: percentiles read from an HDR histogram of the samples, and a
//! bootstrap 95% interval for a percentile (or for the difference of two samples'
//! percentiles), so a budget counts as met only when its whole interval is under the bar.

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Latency percentiles of a sample, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    /// Number of samples.
    pub n: usize,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
}

/// The histogram's unit: samples in ms are recorded as whole microseconds.
const UNITS_PER_MS: f64 = 1000.0;

/// `samples` (ms) in a histogram of microseconds, three significant figures (0.1% of a
/// value), auto-resizing so no sample is ever refused.
pub fn histogram(samples: &[f64]) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!("3 sig figs is valid"));
    h.auto(true);
    for &ms in samples.iter().filter(|v| v.is_finite()) {
        // Sub-microsecond samples count as 1 µs: the histogram's range starts at 1.
        let _ = h.record(((ms * UNITS_PER_MS).round() as u64).max(1));
    }
    h
}

/// The mean of `samples`; `None` when there are none.
pub fn mean(samples: &[f64]) -> Option<f64> {
    (!samples.is_empty()).then(|| samples.iter().sum::<f64>() / samples.len() as f64)
}

/// Percentiles of `samples` (milliseconds, any order); `NaN`s when there are none.
pub fn percentiles(samples: &[f64]) -> Percentiles {
    let h = histogram(samples);
    if h.is_empty() {
        return Percentiles {
            n: 0,
            p50: f64::NAN,
            p95: f64::NAN,
            p99: f64::NAN,
            max: f64::NAN,
        };
    }
    let at = |q: f64| h.value_at_quantile(q) as f64 / UNITS_PER_MS;
    Percentiles {
        n: h.len() as usize,
        p50: at(0.50),
        p95: at(0.95),
        p99: at(0.99),
        max: h.max() as f64 / UNITS_PER_MS,
    }
}

/// A bootstrap 95% interval, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The 2.5th percentile of the resampled statistic.
    pub lo: f64,
    /// The 97.5th percentile.
    pub hi: f64,
}

impl Interval {
    /// `[lo, hi]` with two decimals.
    pub fn text(&self) -> String {
        format!("[{:.2}, {:.2}]", self.lo, self.hi)
    }
}

/// Resamples per interval: enough for the 2.5th / 97.5th percentiles of the statistic to
/// settle, few enough for 10,000-sample inputs to take well under a second.
const RESAMPLES: usize = 1000;

/// The nearest-rank `q` quantile of one resample (with replacement) of `samples`.
fn resampled_quantile(samples: &[f64], q: f64, rng: &mut SmallRng, scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    scratch.extend((0..samples.len()).map(|_| samples[rng.random_range(0..samples.len())]));
    let index = ((q * scratch.len() as f64).ceil() as usize).clamp(1, scratch.len()) - 1;
    *scratch.select_nth_unstable_by(index, f64::total_cmp).1
}

/// The 95% interval of `statistic` over [`RESAMPLES`] draws; a fixed seed, so one run's
/// report reads the same when written twice.
fn bootstrap(mut statistic: impl FnMut(&mut SmallRng) -> f64) -> Interval {
    let mut rng = SmallRng::seed_from_u64(0x6b616e646576);
    let mut draws: Vec<f64> = (0..RESAMPLES).map(|_| statistic(&mut rng)).collect();
    draws.sort_by(f64::total_cmp);
    let at = |q: f64| draws[((q * RESAMPLES as f64) as usize).min(RESAMPLES - 1)];
    Interval {
        lo: at(0.025),
        hi: at(0.975),
    }
}

/// The 95% interval of the `q` quantile of `samples`; `None` without samples.
pub fn interval(samples: &[f64], q: f64) -> Option<Interval> {
    if samples.is_empty() {
        return None;
    }
    let mut scratch = Vec::with_capacity(samples.len());
    Some(bootstrap(|rng| {
        resampled_quantile(samples, q, rng, &mut scratch)
    }))
}

/// The 95% interval of (the `q` quantile of `a`) − (the `q` quantile of `b`), each
/// resampled on its own: what a path adds over another measured beside it.
pub fn difference_interval(a: &[f64], b: &[f64], q: f64) -> Option<Interval> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (mut sa, mut sb) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    Some(bootstrap(|rng| {
        resampled_quantile(a, q, rng, &mut sa) - resampled_quantile(b, q, rng, &mut sb)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_of_nothing_is_none() {
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
    }

    #[test]
    fn percentiles_come_from_the_histogram_within_its_precision() {
        let samples: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let p = percentiles(&samples);
        let close = |a: f64, b: f64| (a - b).abs() <= b * 0.001;
        assert_eq!(p.n, 100);
        assert!(close(p.p50, 50.0) && close(p.p95, 95.0), "{p:?}");
        assert!(close(p.p99, 99.0) && close(p.max, 100.0), "{p:?}");
        assert!(percentiles(&[]).p50.is_nan());
        assert!(close(percentiles(&[7.0]).p99, 7.0));
        assert_eq!(percentiles(&[0.0001]).p50, 0.001, "a floor of 1 µs");
    }

    #[test]
    fn an_interval_holds_its_estimate_and_narrows_with_more_samples() {
        // A skewed sample: 1 ms mostly, a tail up to 100 ms.
        let sample = |n: usize| -> Vec<f64> {
            (0..n)
                .map(|i| {
                    if i % 50 == 0 {
                        1.0 + (i % 100) as f64
                    } else {
                        1.0
                    }
                })
                .collect()
        };
        let small = sample(1_000);
        let large = sample(10_000);
        let ci = interval(&large, 0.5).expect("interval");
        assert!(ci.lo <= 1.0 && 1.0 <= ci.hi, "{ci:?}");
        let (a, b) = (
            interval(&small, 0.99).expect("small"),
            interval(&large, 0.99).expect("large"),
        );
        assert!(a.lo <= a.hi && b.lo <= b.hi);
        assert!(b.hi - b.lo <= a.hi - a.lo, "{a:?} then {b:?}");
        assert_eq!(interval(&[], 0.5), None);
        assert_eq!(interval(&large, 0.99), Some(b), "a fixed seed");
    }

    #[test]
    fn a_difference_interval_brackets_the_shift_between_two_samples() {
        let base: Vec<f64> = (0..2_000).map(|i| 1.0 + (i % 10) as f64 * 0.01).collect();
        let shifted: Vec<f64> = base.iter().map(|v| v + 2.0).collect();
        let d = difference_interval(&shifted, &base, 0.5).expect("difference");
        assert!(d.lo <= 2.0 && 2.0 <= d.hi && d.hi - d.lo < 0.2, "{d:?}");
        assert_eq!(difference_interval(&[], &base, 0.5), None);
    }
}
