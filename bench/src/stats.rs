//! Percentiles and the hand-written SVG latency histogram.

use std::fmt::Write as _;

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

/// The nearest-rank percentile `q` (0..=1) of sorted `samples`.
fn rank(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

/// Percentiles of `samples` (milliseconds, any order).
pub fn percentiles(samples: &[f64]) -> Percentiles {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    Percentiles {
        n: sorted.len(),
        p50: rank(&sorted, 0.50),
        p95: rank(&sorted, 0.95),
        p99: rank(&sorted, 0.99),
        max: sorted.last().copied().unwrap_or(f64::NAN),
    }
}

/// An SVG histogram of one or more latency series (milliseconds) on a shared linear
/// axis up to the largest p99 (samples beyond it land in the last bin, marked "≥").
pub fn histogram_svg(title: &str, series: &[(&str, &str, &[f64])]) -> String {
    const W: f64 = 720.0;
    const H: f64 = 320.0;
    const LEFT: f64 = 50.0;
    const BOTTOM: f64 = 40.0;
    const TOP: f64 = 40.0;
    const BINS: usize = 40;
    let upper = series
        .iter()
        .map(|(_, _, s)| percentiles(s).p99)
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max)
        .max(0.001)
        * 1.05;
    let width = upper / BINS as f64;
    let counts: Vec<Vec<usize>> = series
        .iter()
        .map(|(_, _, samples)| {
            let mut bins = vec![0usize; BINS];
            for &v in samples.iter() {
                let i = ((v / width) as usize).min(BINS - 1);
                bins[i] += 1;
            }
            bins
        })
        .collect();
    let tallest = counts
        .iter()
        .flat_map(|c| c.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let plot_w = W - LEFT - 20.0;
    let plot_h = H - TOP - BOTTOM;
    let bar_w = plot_w / BINS as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(svg, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = write!(
        svg,
        r#"<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for (s, bins) in counts.iter().enumerate() {
        let colour = series[s].1;
        for (i, &count) in bins.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let h = count as f64 / tallest * plot_h;
            let x = LEFT + i as f64 * bar_w;
            let y = TOP + plot_h - h;
            let _ = write!(
                svg,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}" fill="{colour}" fill-opacity="0.55"><title>{}: {count}</title></rect>"#,
                bar_w - 1.0,
                escape(series[s].0)
            );
        }
    }
    // Axes, ticks and legend.
    let base = TOP + plot_h;
    let _ = write!(
        svg,
        r#"<line x1="{LEFT}" y1="{base}" x2="{}" y2="{base}" stroke="black"/><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}" stroke="black"/>"#,
        LEFT + plot_w
    );
    for t in 0..=5 {
        let value = upper * t as f64 / 5.0;
        let x = LEFT + plot_w * t as f64 / 5.0;
        let mark = if t == 5 { "≥" } else { "" };
        let _ = write!(
            svg,
            r#"<line x1="{x:.1}" y1="{base}" x2="{x:.1}" y2="{:.1}" stroke="black"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{mark}{value:.2}</text>"#,
            base + 4.0,
            base + 18.0
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">latency (ms)</text><text x="12" y="{:.1}" transform="rotate(-90 12 {:.1})" text-anchor="middle">count (max {tallest})</text>"#,
        LEFT + plot_w / 2.0,
        H - 4.0,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    for (s, (name, colour, samples)) in series.iter().enumerate() {
        let y = TOP + 14.0 + s as f64 * 16.0;
        let p = percentiles(samples);
        let _ = write!(
            svg,
            r#"<rect x="{:.1}" y="{:.1}" width="12" height="12" fill="{colour}" fill-opacity="0.55"/><text x="{:.1}" y="{y:.1}">{} (p50 {:.2}, p99 {:.2})</text>"#,
            LEFT + plot_w - 250.0,
            y - 10.0,
            LEFT + plot_w - 234.0,
            escape(name),
            p.p50,
            p.p99
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let p = percentiles(&samples);
        assert_eq!(
            (p.n, p.p50, p.p95, p.p99, p.max),
            (100, 50.0, 95.0, 99.0, 100.0)
        );
        assert!(percentiles(&[]).p50.is_nan());
        assert_eq!(percentiles(&[7.0]).p99, 7.0);
    }

    #[test]
    fn the_histogram_is_one_svg_with_a_bar_per_filled_bin_and_a_legend() {
        let a = [1.0, 1.0, 2.0, 50.0];
        let b = [0.5];
        let svg = histogram_svg("t <x>", &[("full", "#c33", &a), ("base", "#36c", &b)]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("t &lt;x&gt;"));
        assert_eq!(svg.matches("fill-opacity=\"0.55\"><title>").count(), 4);
        assert!(svg.contains("full (p50 1.00, p99 50.00)"));
    }
}
