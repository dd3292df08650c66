//! The override tier: Settings-page overrides persisted by the backend.
//!
//! The backend implements [`OverrideStore`] on SQLite; [`InMemoryOverrideStore`]
//! serves tests and tools.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};

/// Persistent flag overrides, keyed by flag key.
///
/// The futures are `Send` so a handler on a multi-threaded runtime can await them.
/// Implementations may write `async fn` for each method.
pub trait OverrideStore: Send + Sync {
    /// Why the store could not be read or written.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Every stored override. Keys the registry no longer knows are ignored by the caller.
    fn overrides(&self)
    -> impl Future<Output = Result<BTreeMap<String, bool>, Self::Error>> + Send;

    /// Stores `Some(value)` as the override of `key`, or removes it on `None`.
    /// Callers validate the key first ([`crate::FlagService::set_override`]).
    fn set_override(
        &self,
        key: &str,
        value: Option<bool>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

impl<T: OverrideStore> OverrideStore for Arc<T> {
    type Error = T::Error;

    fn overrides(
        &self,
    ) -> impl Future<Output = Result<BTreeMap<String, bool>, Self::Error>> + Send {
        (**self).overrides()
    }

    fn set_override(
        &self,
        key: &str,
        value: Option<bool>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send {
        (**self).set_override(key, value)
    }
}

/// An [`OverrideStore`] in a mutex-guarded map; it never fails.
#[derive(Debug, Default)]
pub struct InMemoryOverrideStore {
    overrides: Mutex<BTreeMap<String, bool>>,
}

impl InMemoryOverrideStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store holding `overrides`.
    pub fn with(overrides: BTreeMap<String, bool>) -> Self {
        Self {
            overrides: Mutex::new(overrides),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, bool>> {
        // A panic while holding the lock cannot leave the map half-written, so the
        // data is still good after poisoning.
        self.overrides
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl OverrideStore for InMemoryOverrideStore {
    type Error = Infallible;

    async fn overrides(&self) -> Result<BTreeMap<String, bool>, Infallible> {
        Ok(self.lock().clone())
    }

    async fn set_override(&self, key: &str, value: Option<bool>) -> Result<(), Infallible> {
        let mut map = self.lock();
        match value {
            Some(v) => map.insert(key.to_owned(), v),
            None => map.remove(key),
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn set_replace_and_clear() {
        let store = InMemoryOverrideStore::new();
        assert!(store.overrides().await.expect("infallible").is_empty());
        store
            .set_override("features.a", Some(true))
            .await
            .expect("infallible");
        store
            .set_override("features.a", Some(false))
            .await
            .expect("infallible");
        store
            .set_override("features.b", Some(true))
            .await
            .expect("infallible");
        let map = store.overrides().await.expect("infallible");
        assert_eq!(map.get("features.a"), Some(&false));
        assert_eq!(map.get("features.b"), Some(&true));
        store
            .set_override("features.a", None)
            .await
            .expect("infallible");
        store
            .set_override("features.never", None)
            .await
            .expect("infallible");
        let map = store.overrides().await.expect("infallible");
        assert_eq!(map.len(), 1);
        assert_eq!(map.get("features.a"), None);
    }

    #[tokio::test]
    async fn an_arc_shares_the_same_store() {
        let store = Arc::new(InMemoryOverrideStore::with(
            [("features.a".to_owned(), true)].into(),
        ));
        let other = Arc::clone(&store);
        other
            .set_override("features.b", Some(false))
            .await
            .expect("infallible");
        assert_eq!(store.overrides().await.expect("infallible").len(), 2);
    }
}
