//! [`FlagOverrideStore`]: the Settings page's runtime-flag overrides, and
//! [`StoredOverrides`], which hands any such store to `kandev_flags::FlagService`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::store::StoreError;

/// Where flag overrides are kept.
#[async_trait]
pub trait FlagOverrideStore: Send + Sync {
    /// Every override, by flag key.
    async fn overrides(&self) -> Result<BTreeMap<String, bool>, StoreError>;

    /// Sets (`Some`) or clears (`None`) the override of `key`.
    async fn set_override(&self, key: &str, value: Option<bool>) -> Result<(), StoreError>;
}

/// A [`FlagOverrideStore`] as the flag service's override tier.
#[derive(Clone)]
pub struct StoredOverrides(pub Arc<dyn FlagOverrideStore>);

impl std::fmt::Debug for StoredOverrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredOverrides")
    }
}

impl kandev_flags::OverrideStore for StoredOverrides {
    type Error = StoreError;

    async fn overrides(&self) -> Result<BTreeMap<String, bool>, StoreError> {
        self.0.overrides().await
    }

    async fn set_override(&self, key: &str, value: Option<bool>) -> Result<(), StoreError> {
        self.0.set_override(key, value).await
    }
}
