//! Size limits past which an elicitation is declined rather than mapped.

/// Most properties a `requestedSchema` may declare.
pub const MAX_PROPERTIES: usize = 64;
/// Most options one question may declare.
pub const MAX_OPTIONS: usize = 64;
/// Most bytes the params of one `elicitation/create` may take, as JSON.
pub const MAX_PARAMS_BYTES: usize = 256 * 1024;
