//! The mapping figures, read from criterion's estimates of
//! `bench/benches/mapping.rs` (run by `just bench` just before).

use std::path::Path;

use serde_json::{Value, json};

/// The docs/architecture.md §8 bar: mapping costs at most this many times parsing the same JSON.
pub const TARGET_RATIO: f64 = 2.0;

/// One measured operation beside its `from_slice` baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct MappingFigure {
    /// The criterion group (`map_two_question`, …).
    pub group: String,
    /// The measured function (`map_request` or `build_response`).
    pub operation: String,
    /// Its median time, nanoseconds.
    pub ns: f64,
    /// The median time of `serde_json::from_slice` of the same bytes, nanoseconds.
    pub baseline_ns: f64,
}

impl MappingFigure {
    /// `ns / baseline_ns`.
    pub fn ratio(&self) -> f64 {
        self.ns / self.baseline_ns
    }

    /// As JSON for `report.json`.
    pub fn to_json(&self) -> Value {
        json!({"group": self.group, "operation": self.operation, "median_ns": self.ns,
            "baseline": "serde_json::from_slice of the same bytes", "baseline_median_ns": self.baseline_ns,
            "ratio": self.ratio(), "target_ratio_max": TARGET_RATIO, "meets_target": self.ratio() <= TARGET_RATIO})
    }
}

/// The groups and their measured function, as named in the bench file.
pub const GROUPS: &[(&str, &str)] = &[
    ("map_two_question", "map_request"),
    ("map_sixty_four", "map_request"),
    ("respond_two_question", "build_response"),
    ("respond_sixty_four", "build_response"),
];

fn median_ns(criterion_dir: &Path, group: &str, function: &str) -> Result<f64, String> {
    let path = criterion_dir
        .join(group)
        .join(function)
        .join("new")
        .join("estimates.json");
    let text = std::fs::read_to_string(&path).map_err(|err| {
        format!(
            "{}: {err} (run `cargo bench --workspace --bench mapping` first; `just bench` does)",
            path.display()
        )
    })?;
    let value: Value =
        serde_json::from_str(&text).map_err(|err| format!("{}: {err}", path.display()))?;
    value["median"]["point_estimate"]
        .as_f64()
        .ok_or_else(|| format!("{}: no median.point_estimate", path.display()))
}

/// Reads every figure from `criterion_dir` (`target/criterion`).
pub fn read(criterion_dir: &Path) -> Result<Vec<MappingFigure>, String> {
    GROUPS
        .iter()
        .map(|(group, operation)| {
            Ok(MappingFigure {
                group: (*group).to_owned(),
                operation: (*operation).to_owned(),
                ns: median_ns(criterion_dir, group, operation)?,
                baseline_ns: median_ns(criterion_dir, group, "from_slice")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_medians_and_names_the_missing_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (group, op) in GROUPS {
            for (function, ns) in [(*op, 300.0), ("from_slice", 200.0)] {
                let path = dir.path().join(group).join(function).join("new");
                std::fs::create_dir_all(&path).expect("mkdir");
                std::fs::write(
                    path.join("estimates.json"),
                    json!({"median": {"point_estimate": ns}}).to_string(),
                )
                .expect("write");
            }
        }
        let figures = read(dir.path()).expect("reads");
        assert_eq!(figures.len(), 4);
        assert!((figures[0].ratio() - 1.5).abs() < 1e-9);
        assert_eq!(figures[0].to_json()["meets_target"], true);
        let missing = read(&dir.path().join("nope")).expect_err("missing");
        assert!(missing.contains("cargo bench"), "{missing}");
    }
}
