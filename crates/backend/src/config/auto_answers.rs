//! `[[agents.<id>.auto_answers]]`: rules that answer routine questions of an unattended
//! run (docs/architecture.md §4.5). Each names itself, says which questions it matches,
//! what it answers and after how long; the operator may answer first.
//!
//! ```toml
//! [[agents.claude.auto_answers]]
//! name = "confirm-deploys"
//! message = "(?i)deploy"          # a regex on the request's message
//! question_id = "confirm"         # the question it answers
//! options = ["yes"]               # option ids; or text = "…"; or answer = "defaults" | "skip"
//! after = "30s"                   # from 0 s to less than the answer deadline
//! ```
//!
//! What the configuration alone decides is checked at start, one line per mistake
//! ([`validate`]); whether an answer fits a question is only known when the question
//! arrives, and is checked then against the question (`auto_answers`).

use std::time::Duration;

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

use super::ConfigError;

/// The env var of agentctl's answer deadline, which the local executor passes on.
pub const ANSWER_TIMEOUT_VAR: &str = "KANDEV_ELICITATION_ANSWER_TIMEOUT";
/// agentctl's default answer deadline (F13a).
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_secs(55 * 60);
/// The compiled size a rule's pattern may take; matching is linear in the text (the
/// `regex` crate never backtracks), so this bounds the time a match takes.
const PATTERN_SIZE_LIMIT: usize = 256 * 1024;

/// One rule as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoAnswerConfig {
    /// The rule's name; what it answers is recorded as answered by `rule:<name>`.
    pub name: String,
    /// Matches a form with a question of this id (and the answer goes to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_id: Option<String>,
    /// A regex the request's message must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A regex a question's prompt must match (the named question's, with `question_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The tool that asked: `elicitation` (ACP `elicitation/create`) or
    /// `ask_user_question_kandev`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Option ids to select.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Free text to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `defaults` (the schema's defaults) or `skip` (decline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// How long the question waits for the operator before the rule answers.
    #[serde(default, with = "super::humantime_text")]
    pub after: Duration,
}

/// The tool a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleTool {
    /// ACP `elicitation/create`.
    Elicitation,
    /// The `ask_user_question_kandev` MCP tool.
    AskUserQuestion,
}

/// What a rule answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleAnswer {
    /// These options and/or this text, for one question.
    Given {
        /// Option ids.
        options: Vec<String>,
        /// Free text (empty for none).
        text: String,
    },
    /// The schema's defaults.
    Defaults,
    /// Skip (`decline`).
    Skip,
}

/// A rule ready to match: its patterns compiled.
#[derive(Debug, Clone)]
pub struct AutoAnswerRule {
    /// Its name.
    pub name: String,
    /// The question it answers.
    pub question_id: Option<String>,
    /// The message pattern.
    pub message: Option<Regex>,
    /// The prompt pattern.
    pub prompt: Option<Regex>,
    /// The tool.
    pub tool: Option<RuleTool>,
    /// What it answers.
    pub answer: RuleAnswer,
    /// How long it waits.
    pub after: Duration,
}

/// The answer deadline agentctl enforces: `KANDEV_ELICITATION_ANSWER_TIMEOUT` when set
/// (the local executor passes it on), else agentctl's default.
pub fn answer_deadline() -> Duration {
    std::env::var(ANSWER_TIMEOUT_VAR)
        .ok()
        .and_then(|text| humantime::parse_duration(&text).ok())
        .unwrap_or(DEFAULT_ANSWER_TIMEOUT)
}

fn pattern(key: &str, text: &Option<String>) -> Result<Option<Regex>, ConfigError> {
    let Some(text) = text else {
        return Ok(None);
    };
    RegexBuilder::new(text)
        .size_limit(PATTERN_SIZE_LIMIT)
        .build()
        .map(Some)
        .map_err(|err| {
            let first = err.to_string();
            let line = first.lines().last().unwrap_or("invalid").trim().to_owned();
            ConfigError::new(key, format!("`{text}` is not a valid regex: {line}"))
        })
}

impl AutoAnswerConfig {
    /// The rule, compiled and checked; `at` is its key (`agents.<id>.auto_answers[<i>]`).
    pub fn compile(&self, at: &str, deadline: Duration) -> Result<AutoAnswerRule, ConfigError> {
        if !super::is_valid_operator_name(&self.name) {
            return Err(ConfigError::new(
                format!("{at}.name"),
                "must be letters, digits, `.`, `_`, `@` or `-`, starting with a letter or digit",
            ));
        }
        let tool = match self.tool.as_deref() {
            None => None,
            Some("elicitation") => Some(RuleTool::Elicitation),
            Some("ask_user_question_kandev") => Some(RuleTool::AskUserQuestion),
            Some(other) => {
                return Err(ConfigError::new(
                    format!("{at}.tool"),
                    format!("`{other}` is no tool; use elicitation or ask_user_question_kandev"),
                ));
            }
        };
        let given = !self.options.is_empty() || self.text.is_some();
        let answer = match (self.answer.as_deref(), given) {
            (Some("defaults"), false) => RuleAnswer::Defaults,
            (Some("skip"), false) => RuleAnswer::Skip,
            (None, true) => RuleAnswer::Given {
                options: self.options.clone(),
                text: self.text.clone().unwrap_or_default(),
            },
            (Some(other), false) => {
                return Err(ConfigError::new(
                    format!("{at}.answer"),
                    format!(
                        "`{other}` is no answer; use defaults or skip, or give options or text"
                    ),
                ));
            }
            (Some(_), true) => {
                return Err(ConfigError::new(
                    format!("{at}.answer"),
                    "give either answer = \"defaults\" | \"skip\", or options and/or text, not both",
                ));
            }
            (None, false) => {
                return Err(ConfigError::new(
                    at,
                    "says nothing to answer; give options, text, or answer = \"defaults\" | \"skip\"",
                ));
            }
        };
        if self.options.iter().any(|o| o.is_empty()) {
            return Err(ConfigError::new(
                format!("{at}.options"),
                "an option id cannot be empty",
            ));
        }
        if self.after >= deadline {
            return Err(ConfigError::new(
                format!("{at}.after"),
                format!(
                    "must be less than the answer deadline ({}; {ANSWER_TIMEOUT_VAR}), or agentctl settles the question first",
                    humantime::format_duration(deadline)
                ),
            ));
        }
        Ok(AutoAnswerRule {
            name: self.name.clone(),
            question_id: self.question_id.clone(),
            message: pattern(&format!("{at}.message"), &self.message)?,
            prompt: pattern(&format!("{at}.prompt"), &self.prompt)?,
            tool,
            answer,
            after: self.after,
        })
    }
}

/// Checks every agent's rules: each compiles, and names are unique per agent.
pub(super) fn validate(config: &super::Config) -> Result<(), ConfigError> {
    let deadline = answer_deadline();
    for (id, agent) in &config.agents {
        let mut names = std::collections::BTreeSet::new();
        for (i, rule) in agent.auto_answers.iter().enumerate() {
            let at = format!("agents.{id}.auto_answers[{i}]");
            rule.compile(&at, deadline)?;
            if !names.insert(rule.name.as_str()) {
                return Err(ConfigError::new(
                    format!("{at}.name"),
                    format!("`{}` names two rules of this agent", rule.name),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use figment::providers::Format;

    fn rule(toml: &str) -> AutoAnswerConfig {
        figment::Figment::from(figment::providers::Toml::string(toml))
            .extract()
            .expect("parses")
    }

    fn compile(toml: &str) -> Result<AutoAnswerRule, String> {
        rule(toml)
            .compile("agents.a.auto_answers[0]", Duration::from_secs(60))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn each_answer_kind_compiles() {
        let given = compile("name = \"r\"\nquestion_id = \"q\"\noptions = [\"A\"]\nafter = \"5s\"")
            .expect("valid");
        assert_eq!(
            given.answer,
            RuleAnswer::Given {
                options: vec!["A".into()],
                text: String::new()
            }
        );
        assert_eq!(given.after, Duration::from_secs(5));
        assert_eq!(
            compile("name = \"r\"\nanswer = \"defaults\"")
                .expect("valid")
                .answer,
            RuleAnswer::Defaults
        );
        let skip = compile(
            "name = \"r\"\nanswer = \"skip\"\nmessage = \"(?i)deploy\"\ntool = \"elicitation\"",
        )
        .expect("valid");
        assert_eq!(skip.answer, RuleAnswer::Skip);
        assert!(skip.message.expect("pattern").is_match("Deploy now?"));
        assert_eq!(skip.tool, Some(RuleTool::Elicitation));
    }

    #[test]
    fn mistakes_are_one_line_errors_naming_the_key() {
        for (toml, key) in [
            ("name = \"r\"", "`agents.a.auto_answers[0]`:"),
            (
                "name = \"r\"\nanswer = \"sometimes\"",
                "auto_answers[0].answer",
            ),
            (
                "name = \"r\"\nanswer = \"skip\"\noptions = [\"A\"]",
                "auto_answers[0].answer",
            ),
            (
                "name = \"r\"\nanswer = \"skip\"\nmessage = \"(\"",
                "auto_answers[0].message",
            ),
            (
                "name = \"r\"\nanswer = \"skip\"\nprompt = \"[z-a]\"",
                "auto_answers[0].prompt",
            ),
            (
                "name = \"r\"\nanswer = \"skip\"\ntool = \"bash\"",
                "auto_answers[0].tool",
            ),
            ("name = \"r x\"\nanswer = \"skip\"", "auto_answers[0].name"),
            (
                "name = \"r\"\nanswer = \"skip\"\nafter = \"1m\"",
                "auto_answers[0].after",
            ),
            ("name = \"r\"\noptions = [\"\"]", "auto_answers[0].options"),
        ] {
            let err = compile(toml).expect_err(toml);
            assert!(err.contains(key), "{toml}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let parsed = figment::Figment::from(figment::providers::Toml::string(
            "name = \"r\"\nanswer = \"skip\"\nafterwards = \"1s\"",
        ))
        .extract::<AutoAnswerConfig>();
        assert!(parsed.is_err());
    }
}
