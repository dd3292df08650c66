//! The report's SVG figures, drawn with `plotters`: latency histograms and the sweep's
//! p99-against-offered-rate curve.

use std::path::Path;

use plotters::prelude::*;

use crate::stats::percentiles;

/// One named, coloured latency sample (ms).
pub type Series<'a> = (&'a str, RGBColor, &'a [f64]);

/// The direct path's colour.
pub const DIRECT: RGBColor = RGBColor(0x2e, 0x6f, 0xd0);

/// Series colours, in column order.
pub const COLOURS: [RGBColor; 3] = [
    RGBColor(0xc0, 0x39, 0x2b),
    RGBColor(0x8e, 0x44, 0xad),
    RGBColor(0x27, 0xae, 0x60),
];

const SIZE: (u32, u32) = (720, 320);
const BINS: usize = 40;

fn io(err: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(err.to_string())
}

/// Histograms of `series` on a shared linear axis up to the largest p99 (samples beyond it
/// land in the last bin), written to `path`.
pub fn histogram(path: &Path, title: &str, series: &[Series<'_>]) -> std::io::Result<()> {
    let upper = series
        .iter()
        .map(|(_, _, s)| percentiles(s).p99)
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max)
        .max(0.001)
        * 1.05;
    let width = upper / BINS as f64;
    let bins: Vec<Vec<u32>> = series
        .iter()
        .map(|(_, _, samples)| {
            let mut bins = vec![0u32; BINS];
            for &v in samples.iter().filter(|v| v.is_finite()) {
                bins[((v / width) as usize).min(BINS - 1)] += 1;
            }
            bins
        })
        .collect();
    let tallest = bins.iter().flatten().copied().max().unwrap_or(1).max(1);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(io)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..upper, 0u32..tallest + tallest / 10 + 1)
        .map_err(io)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("latency (ms; the last bin holds everything beyond)")
        .y_desc("count")
        .draw()
        .map_err(io)?;
    for ((name, colour, samples), counts) in series.iter().zip(&bins) {
        let p = percentiles(samples);
        let style = colour.mix(0.55).filled();
        chart
            .draw_series(
                counts
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(i, &c)| {
                        let x = i as f64 * width;
                        Rectangle::new([(x, 0), (x + width * 0.95, c)], style)
                    }),
            )
            .map_err(io)?
            .label(format!("{name} (p50 {:.2}, p99 {:.2} ms)", p.p50, p.p99))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], style));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(io)?;
    root.present().map_err(io)
}

/// One named, coloured curve of `(x, y)` points.
pub type Curve<'a> = (&'a str, RGBColor, &'a [(f64, f64)]);

/// Curves of y against x with a dashed horizontal bar at `bar`, written to `path`.
pub fn curves(
    path: &Path,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    curves: &[Curve<'_>],
    bar: f64,
) -> std::io::Result<()> {
    let points = || curves.iter().flat_map(|(_, _, p)| p.iter());
    let x_max = points().map(|p| p.0).fold(1.0_f64, f64::max) * 1.05;
    let y_max = points()
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .fold(bar, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(io)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(io)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(io)?;
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, bar), (x_max, bar)],
            6,
            4,
            BLACK.stroke_width(1),
        ))
        .map_err(io)?
        .label(format!("bar {bar} ms"))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 12, y)], BLACK));
    for (name, colour, points) in curves {
        let colour = *colour;
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                colour.stroke_width(2),
            ))
            .map_err(io)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 12, y)], colour));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(io)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(io)?;
    root.present().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_is_an_svg_with_a_legend_per_series() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("h.svg");
        let a = [1.0, 1.0, 2.0, 50.0];
        let b = [0.5];
        histogram(
            &path,
            "t",
            &[("full", COLOURS[0], &a), ("base", COLOURS[1], &b)],
        )
        .expect("drawn");
        let svg = std::fs::read_to_string(&path).expect("read");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("full (p50 1.00, p99 50.0"), "{svg}");
        assert!(svg.contains("base (p50 0.50, p99 0.50 ms)"), "{svg}");
    }

    #[test]
    fn a_curve_plot_names_each_curve_and_the_bar() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("c.svg");
        let points = [(100.0, 2.0), (200.0, 30.0)];
        curves(
            &path,
            "sweep",
            ("rate", "p99"),
            &[("SQLite", COLOURS[0], &points)],
            25.0,
        )
        .expect("drawn");
        let svg = std::fs::read_to_string(&path).expect("read");
        assert!(svg.contains("SQLite") && svg.contains("bar 25 ms"), "{svg}");
    }
}
