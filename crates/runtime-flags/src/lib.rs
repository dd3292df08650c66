//! # kandev-flags
//!
//! Kandev's runtime flags (docs/architecture.md §4.5):
//!
//! - [`REGISTRY`]: every flag with the metadata the Settings page shows
//!   ([`FlagDefinition`]); today it holds [`ACP_ELICITATION`].
//! - [`Profiles`]: per-profile values from `profiles.yaml`, for the active [`Profile`].
//! - Precedence, per flag: env var > Settings override ([`OverrideStore`]) >
//!   profile > registry default, with the deciding tier kept as [`FlagSource`]
//!   and `locked` set when the env var is.
//! - [`FlagService`]: resolves all flags for the Settings API and validates a PATCH.
//! - [`FlagSnapshot`]: the values resolved at session start, sent to agentctl as
//!   `{"features.acpElicitation": true}`.

pub mod env;
pub mod profile;
pub mod registry;
pub mod resolve;
pub mod service;
pub mod snapshot;
pub mod store;

pub use env::{EnvSource, EnvValueError, ProcessEnv, parse_env_bool};
pub use profile::{Profile, Profiles, ProfilesError, UnknownFlagKey, UnknownProfile};
pub use registry::{
    ACP_ELICITATION, FlagDefinition, FlagKind, REGISTRY, RiskLevel, Stability, definition,
    definition_by_env_var, definitions,
};
pub use resolve::{FlagSource, ResolvedFlag, Tiers, resolve_all, resolve_flag};
pub use service::{FlagError, FlagService};
pub use snapshot::FlagSnapshot;
pub use store::{InMemoryOverrideStore, OverrideStore};
