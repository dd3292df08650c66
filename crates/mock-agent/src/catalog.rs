//! Where scenarios come from: the ones embedded in the binary, and `<name>.json`
//! files in `--scenario-dir` (which take precedence, so a test can override one).

use std::path::{Path, PathBuf};

use crate::scenario::{Scenario, ScenarioError};

/// The scenarios compiled into the binary, by name.
pub const EMBEDDED: &[(&str, &str)] = &[
    ("demo", include_str!("../scenarios/demo.json")),
    ("plain", include_str!("../scenarios/plain.json")),
    ("single", include_str!("../scenarios/single.json")),
    ("multi", include_str!("../scenarios/multi.json")),
    ("mcp-apikey", include_str!("../scenarios/mcp-apikey.json")),
    ("refusal", include_str!("../scenarios/refusal.json")),
    (
        "two-identical",
        include_str!("../scenarios/two-identical.json"),
    ),
    ("url-mode", include_str!("../scenarios/url-mode.json")),
    (
        "request-scope",
        include_str!("../scenarios/request-scope.json"),
    ),
    (
        "no-questions",
        include_str!("../scenarios/no-questions.json"),
    ),
    ("malformed", include_str!("../scenarios/malformed.json")),
    (
        "agent-cancel",
        include_str!("../scenarios/agent-cancel.json"),
    ),
    ("crash", include_str!("../scenarios/crash.json")),
    ("extended", include_str!("../scenarios/extended.json")),
    ("permission", include_str!("../scenarios/permission.json")),
    ("ask", include_str!("../scenarios/ask.json")),
    (
        "ask-and-elicit",
        include_str!("../scenarios/ask-and-elicit.json"),
    ),
    ("ask-twice", include_str!("../scenarios/ask-twice.json")),
];

/// Why a scenario could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// Neither embedded nor in the scenario directory.
    #[error("unknown scenario {0}")]
    Unknown(String),
    /// A name that could escape the scenario directory or is empty.
    #[error("invalid scenario name {0:?}: use letters, digits, `-` and `_`")]
    BadName(String),
    /// The file exists but cannot be read.
    #[error("cannot read scenario file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The scenario does not parse.
    #[error("invalid scenario {name} ({origin}): {source}")]
    Invalid {
        /// The scenario name.
        name: String,
        /// `embedded` or the file path.
        origin: String,
        /// The parse error.
        source: ScenarioError,
    },
    /// The file's `name` is not its file name.
    #[error("scenario file {path} is named {found:?}; its name must match the file name")]
    NameMismatch {
        /// The file.
        path: PathBuf,
        /// The `name` inside it.
        found: String,
    },
}

/// One line of `--list-scenarios`.
#[derive(Debug)]
pub struct Listing {
    /// Scenario name.
    pub name: String,
    /// `embedded` or the file it came from.
    pub origin: String,
    /// The description, or why it does not load.
    pub summary: Result<String, String>,
}

/// The scenarios available to this process.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    dir: Option<PathBuf>,
}

impl Catalog {
    /// The embedded scenarios, plus those in `dir` when given.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// Load a scenario by name. Files are read on every call so a test may add
    /// one to the directory while the agent runs.
    pub fn load(&self, name: &str) -> Result<Scenario, CatalogError> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(CatalogError::BadName(name.to_owned()));
        }
        if let Some(dir) = &self.dir {
            let path = dir.join(format!("{name}.json"));
            match std::fs::read_to_string(&path) {
                Ok(text) => return parse_file(name, &path, &text),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(CatalogError::Read { path, source }),
            }
        }
        let (_, text) = EMBEDDED
            .iter()
            .find(|(embedded, _)| *embedded == name)
            .ok_or_else(|| CatalogError::Unknown(name.to_owned()))?;
        Scenario::from_json(text).map_err(|source| CatalogError::Invalid {
            name: name.to_owned(),
            origin: "embedded".to_owned(),
            source,
        })
    }

    /// Every scenario this catalog knows, directory files first, then embedded.
    pub fn list(&self) -> Result<Vec<Listing>, CatalogError> {
        let mut listings = Vec::new();
        if let Some(dir) = &self.dir {
            let entries = std::fs::read_dir(dir).map_err(|source| CatalogError::Read {
                path: dir.clone(),
                source,
            })?;
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .filter_map(|entry| {
                    let path = entry.path();
                    (path.extension()? == "json")
                        .then(|| path.file_stem()?.to_str().map(str::to_owned))
                        .flatten()
                })
                .collect();
            names.sort();
            for name in names {
                listings.push(Listing {
                    summary: self
                        .load(&name)
                        .map(|scenario| scenario.description)
                        .map_err(|error| error.to_string()),
                    origin: dir.join(format!("{name}.json")).display().to_string(),
                    name,
                });
            }
        }
        for (name, text) in EMBEDDED {
            if listings.iter().any(|listing| listing.name == *name) {
                continue;
            }
            listings.push(Listing {
                name: (*name).to_owned(),
                origin: "embedded".to_owned(),
                summary: Scenario::from_json(text)
                    .map(|scenario| scenario.description)
                    .map_err(|error| error.to_string()),
            });
        }
        Ok(listings)
    }
}

fn parse_file(name: &str, path: &Path, text: &str) -> Result<Scenario, CatalogError> {
    let scenario = Scenario::from_json(text).map_err(|source| CatalogError::Invalid {
        name: name.to_owned(),
        origin: path.display().to_string(),
        source,
    })?;
    if scenario.name != name {
        return Err(CatalogError::NameMismatch {
            path: path.to_owned(),
            found: scenario.name,
        });
    }
    Ok(scenario)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Step;

    #[test]
    fn every_embedded_scenario_parses_under_its_own_name() {
        let catalog = Catalog::default();
        for (name, _) in EMBEDDED {
            let scenario = catalog.load(name).expect("embedded scenario loads");
            assert_eq!(scenario.name, *name);
            assert!(!scenario.description.is_empty(), "{name} has a description");
        }
    }

    #[test]
    fn the_format_note_scenarios_are_all_embedded() {
        for name in [
            "demo",
            "plain",
            "single",
            "multi",
            "mcp-apikey",
            "refusal",
            "two-identical",
            "url-mode",
            "request-scope",
            "no-questions",
            "malformed",
            "agent-cancel",
            "crash",
            "extended",
            "permission",
        ] {
            assert!(
                EMBEDDED.iter().any(|(embedded, _)| *embedded == name),
                "{name} missing"
            );
        }
    }

    #[test]
    fn plain_never_elicits() {
        let scenario = Catalog::default().load("plain").expect("loads");
        assert!(scenario.steps.iter().all(|step| !matches!(
            step,
            Step::Elicit { .. } | Step::ElicitQuestions { .. } | Step::ElicitRaw { .. }
        )));
    }

    #[test]
    fn directory_scenarios_override_embedded_and_are_read_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Catalog::new(Some(dir.path().to_owned()));
        assert!(matches!(
            catalog.load("mine"),
            Err(CatalogError::Unknown(_))
        ));
        std::fs::write(
            dir.path().join("mine.json"),
            r#"{"name": "mine", "steps": [{"text": "hi"}]}"#,
        )
        .expect("write");
        std::fs::write(
            dir.path().join("demo.json"),
            r#"{"name": "demo", "description": "override", "steps": []}"#,
        )
        .expect("write");
        std::fs::write(
            dir.path().join("other.json"),
            r#"{"name": "not-other", "steps": []}"#,
        )
        .expect("write");
        assert_eq!(
            catalog.load("mine").expect("loads").steps,
            vec![Step::Text("hi".to_owned())]
        );
        assert_eq!(catalog.load("demo").expect("loads").description, "override");
        assert!(matches!(
            catalog.load("other"),
            Err(CatalogError::NameMismatch { .. })
        ));
        let listing = catalog.list().expect("lists");
        assert_eq!(
            listing.iter().filter(|entry| entry.name == "demo").count(),
            1
        );
        assert!(
            listing
                .iter()
                .any(|entry| entry.name == "other" && entry.summary.is_err())
        );
    }

    #[test]
    fn names_cannot_escape_the_directory() {
        let catalog = Catalog::new(Some(PathBuf::from("/tmp")));
        for name in ["../etc/passwd", "a/b", "", "x.json"] {
            assert!(
                matches!(catalog.load(name), Err(CatalogError::BadName(_))),
                "{name}"
            );
        }
    }
}
