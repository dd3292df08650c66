//! The report's building blocks: cells, rows, headers and the histograms beside them.

use std::fmt::Write as _;
use std::path::Path;

use crate::plot;
use crate::report::is_skipped;
use crate::stats::Percentiles;

/// How a part that has no figures is shown: skipped (its tool is missing) or broken.
pub(super) fn status(err: &str) -> &'static str {
    if is_skipped(err) { "skipped" } else { "BROKEN" }
}

/// A budget's verdict.
pub(super) fn met(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**not met**",
        None => "not measured",
    }
}

/// A table row: a label and one cell per column.
pub(super) fn row(md: &mut String, label: &str, cells: &[String]) {
    let _ = writeln!(md, "| {label} | {} |", cells.join(" | "));
}

/// A table's header row and its rule.
pub(super) fn header(md: &mut String, first: &str, columns: &[&str]) {
    row(
        md,
        first,
        &columns.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>(),
    );
    let _ = writeln!(md, "|---|{}", "---|".repeat(columns.len()));
}

/// A part's cell: its figure, or its status when it has none.
pub(super) fn cell<T>(part: &Result<T, String>, f: impl FnOnce(&T) -> String) -> String {
    match part {
        Ok(v) => f(v),
        Err(err) => status(err).to_owned(),
    }
}

/// A curve's name, colour and points, before [`plot::curves`] borrows them.
pub(super) type OwnedCurve = (String, plotters::style::RGBColor, Vec<(f64, f64)>);

/// One percentile of a sample.
pub(super) type Pick = fn(&Percentiles) -> f64;

/// Writes a histogram of `series` to `dir/file`.
pub(super) fn write_svg(
    dir: &Path,
    file: &str,
    title: &str,
    series: &[(String, plotters::style::RGBColor, &[f64])],
) -> std::io::Result<()> {
    let borrowed: Vec<plot::Series<'_>> = series
        .iter()
        .map(|(name, colour, samples)| (name.as_str(), *colour, *samples))
        .collect();
    plot::histogram(&dir.join(file), title, &borrowed)
}
