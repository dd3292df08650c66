//! agentctl's own timing configuration, read from its environment (docs/architecture.md
//! §4.5, F13a).
//!
//! agentctl never reads `KANDEV_FEATURES_*` (F5): runtime flags arrive per session in
//! `agent.session.start`.

use std::time::Duration;

/// Env var of the elicitation answer deadline.
pub const ANSWER_TIMEOUT_VAR: &str = "KANDEV_ELICITATION_ANSWER_TIMEOUT";
/// Env var of the ACP idle timeout.
pub const IDLE_TIMEOUT_VAR: &str = "KANDEV_ACP_IDLE_TIMEOUT";
/// Default answer deadline: 55 minutes.
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_secs(55 * 60);
/// Env var of the `ask_user_question_kandev` tool call's own deadline.
pub const ASK_TIMEOUT_VAR: &str = "KANDEV_ASK_USER_QUESTION_TIMEOUT";
/// Default deadline of an `ask_user_question_kandev` call: 2 hours.
pub const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_secs(2 * 60 * 60);
/// Default ACP idle timeout: 1 hour.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The durations agentctl enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// How long a pending elicitation waits for the operator before agentctl answers `decline`.
    pub answer: Duration,
    /// How long a running turn may go without any frame from the agent before agentctl
    /// gives up on the agent. Always longer than `answer`, so a deadline decline is
    /// agentctl's own act and never a connection teardown (AC-64).
    pub idle: Duration,
    /// How long an `ask_user_question_kandev` call waits for the operator before it
    /// returns a timed-out tool error. A waiting call counts as agent activity, so it
    /// may exceed `idle`.
    pub ask: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            answer: DEFAULT_ANSWER_TIMEOUT,
            idle: DEFAULT_IDLE_TIMEOUT,
            ask: DEFAULT_ASK_TIMEOUT,
        }
    }
}

/// A configuration agentctl refuses to start with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A duration that humantime cannot parse (`2s`, `55m`, `1h 30m` are fine).
    #[error("{var}={value:?} is not a duration (examples: 300ms, 2s, 55m, 1h): {reason}")]
    InvalidDuration {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// humantime's complaint.
        reason: String,
    },
    /// A zero duration would settle or tear down everything at once.
    #[error("{var} must be longer than zero")]
    Zero {
        /// The variable.
        var: &'static str,
    },
    /// The answer deadline must be strictly below the idle timeout (AC-64).
    #[error(
        "{ANSWER_TIMEOUT_VAR} ({answer}) must be shorter than {IDLE_TIMEOUT_VAR} ({idle}), \
         so an unanswered elicitation is declined before the agent connection is given up"
    )]
    AnswerNotBelowIdle {
        /// The answer deadline, formatted.
        answer: String,
        /// The idle timeout, formatted.
        idle: String,
    },
}

impl Timeouts {
    /// Reads both durations from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// Reads both durations through `lookup` (a missing or blank value takes the default).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let answer = read_duration(&lookup, ANSWER_TIMEOUT_VAR, DEFAULT_ANSWER_TIMEOUT)?;
        let idle = read_duration(&lookup, IDLE_TIMEOUT_VAR, DEFAULT_IDLE_TIMEOUT)?;
        let ask = read_duration(&lookup, ASK_TIMEOUT_VAR, DEFAULT_ASK_TIMEOUT)?;
        let timeouts = Self { answer, idle, ask };
        timeouts.validate()?;
        Ok(timeouts)
    }

    /// Checks the invariant `answer < idle`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.answer >= self.idle {
            return Err(ConfigError::AnswerNotBelowIdle {
                answer: humantime::format_duration(self.answer).to_string(),
                idle: humantime::format_duration(self.idle).to_string(),
            });
        }
        Ok(())
    }
}

fn read_duration(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: Duration,
) -> Result<Duration, ConfigError> {
    let Some(value) = lookup(var).filter(|v| !v.trim().is_empty()) else {
        return Ok(default);
    };
    let parsed =
        humantime::parse_duration(value.trim()).map_err(|err| ConfigError::InvalidDuration {
            var,
            value: value.clone(),
            reason: err.to_string(),
        })?;
    if parsed.is_zero() {
        return Err(ConfigError::Zero { var });
    }
    Ok(parsed)
}

/// The instant `after` from now, as the RFC 3339 UTC text the agent stream carries in
/// `expires_at` (the operator sees when a question will be given up).
pub fn deadline_after(after: Duration) -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now() + after).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_are_55m_and_1h() {
        let t = Timeouts::from_lookup(env(&[])).expect("defaults are valid");
        assert_eq!(t.answer, Duration::from_secs(3300));
        assert_eq!(t.idle, Duration::from_secs(3600));
    }

    #[test]
    fn humantime_values_are_read() {
        let t = Timeouts::from_lookup(env(&[
            (ANSWER_TIMEOUT_VAR, "300ms"),
            (IDLE_TIMEOUT_VAR, "1s"),
        ]))
        .expect("valid");
        assert_eq!(
            t,
            Timeouts {
                answer: Duration::from_millis(300),
                idle: Duration::from_secs(1),
                ask: DEFAULT_ASK_TIMEOUT,
            }
        );
    }

    #[test]
    fn answer_equal_to_idle_is_refused() {
        let err = Timeouts::from_lookup(env(&[(ANSWER_TIMEOUT_VAR, "1h")])).expect_err("1h == 1h");
        assert!(
            matches!(err, ConfigError::AnswerNotBelowIdle { .. }),
            "{err}"
        );
    }

    #[test]
    fn answer_above_idle_is_refused() {
        let err =
            Timeouts::from_lookup(env(&[(ANSWER_TIMEOUT_VAR, "2s"), (IDLE_TIMEOUT_VAR, "1s")]))
                .expect_err("2s > 1s");
        assert!(err.to_string().contains(ANSWER_TIMEOUT_VAR), "{err}");
    }

    #[test]
    fn garbage_and_zero_are_refused() {
        let err = Timeouts::from_lookup(env(&[(IDLE_TIMEOUT_VAR, "soon")])).expect_err("garbage");
        assert!(matches!(
            err,
            ConfigError::InvalidDuration {
                var: IDLE_TIMEOUT_VAR,
                ..
            }
        ));
        let err = Timeouts::from_lookup(env(&[(ANSWER_TIMEOUT_VAR, "0s")])).expect_err("zero");
        assert_eq!(
            err,
            ConfigError::Zero {
                var: ANSWER_TIMEOUT_VAR
            }
        );
    }

    #[test]
    fn ask_timeout_defaults_to_2h_and_is_read() {
        assert_eq!(
            Timeouts::from_lookup(env(&[])).expect("defaults").ask,
            Duration::from_secs(7200)
        );
        let t = Timeouts::from_lookup(env(&[(ASK_TIMEOUT_VAR, "3s")])).expect("valid");
        assert_eq!(t.ask, Duration::from_secs(3));
    }

    #[test]
    fn blank_means_default() {
        let t = Timeouts::from_lookup(env(&[(ANSWER_TIMEOUT_VAR, "  ")])).expect("blank");
        assert_eq!(t.answer, DEFAULT_ANSWER_TIMEOUT);
    }
}
