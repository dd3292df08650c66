//! [`Timestamp`]: an instant in UTC, to the microsecond, written as RFC 3339 with six
//! fraction digits (`2026-12-01T09:30:57.123456Z`) so that text order is time order.
//! It binds itself (docs/decisions/0007): RFC 3339 `TEXT` on SQLite, `TIMESTAMPTZ` on
//! PostgreSQL, so no query converts one by hand.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::{Database, Decode, Encode, Postgres, Sqlite, Type};

/// An instant, microsecond precision (what both SQLite text and PostgreSQL keep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(DateTime<Utc>);

impl Timestamp {
    /// Now, truncated to microseconds so a stored value reads back equal.
    pub fn now() -> Self {
        Self(Utc::now().trunc_subsecs(6))
    }

    /// The instant.
    pub fn instant(self) -> DateTime<Utc> {
        self.0
    }

    /// `by` later (saturating at the largest instant chrono holds).
    pub fn plus(self, by: std::time::Duration) -> Self {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        Self(
            self.0
                .checked_add_signed(by)
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        )
    }

    /// The fixed-width RFC 3339 text.
    pub fn to_rfc3339(self) -> String {
        self.0.to_rfc3339_opts(SecondsFormat::Micros, true)
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(at: DateTime<Utc>) -> Self {
        Self(at.trunc_subsecs(6))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

/// Text that is not an RFC 3339 instant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an RFC 3339 timestamp")]
pub struct BadTimestamp(pub String);

impl FromStr for Timestamp {
    type Err = BadTimestamp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DateTime::parse_from_rfc3339(s)
            .map(|at| Self::from(at.with_timezone(&Utc)))
            .map_err(|_| BadTimestamp(s.to_owned()))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// SQLite has no time type: the fixed-width text, whose order is time order.
impl Type<Sqlite> for Timestamp {
    fn type_info() -> <Sqlite as Database>::TypeInfo {
        <str as Type<Sqlite>>::type_info()
    }

    fn compatible(ty: &<Sqlite as Database>::TypeInfo) -> bool {
        <str as Type<Sqlite>>::compatible(ty)
    }
}

impl<'q> Encode<'q, Sqlite> for Timestamp {
    fn encode_by_ref(
        &self,
        buf: &mut <Sqlite as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        <String as Encode<'q, Sqlite>>::encode(self.to_rfc3339(), buf)
    }
}

impl<'r> Decode<'r, Sqlite> for Timestamp {
    fn decode(value: <Sqlite as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(<&str as Decode<'r, Sqlite>>::decode(value)?.parse()?)
    }
}

/// PostgreSQL keeps the instant itself (`TIMESTAMPTZ`, microseconds).
impl Type<Postgres> for Timestamp {
    fn type_info() -> <Postgres as Database>::TypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &<Postgres as Database>::TypeInfo) -> bool {
        <DateTime<Utc> as Type<Postgres>>::compatible(ty)
    }
}

impl<'q> Encode<'q, Postgres> for Timestamp {
    fn encode_by_ref(
        &self,
        buf: &mut <Postgres as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        <DateTime<Utc> as Encode<'q, Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for Timestamp {
    fn decode(value: <Postgres as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(Self::from(<DateTime<Utc> as Decode<'r, Postgres>>::decode(
            value,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn text_is_fixed_width_utc_with_microseconds() {
        let at: Timestamp = "2026-12-01T10:30:57.5+01:00".parse().expect("parses");
        assert_eq!(at.to_rfc3339(), "2026-12-01T09:30:57.500000Z");
        assert!("yesterday".parse::<Timestamp>().is_err());
        assert_eq!(
            serde_json::to_value(at).expect("json"),
            serde_json::json!("2026-12-01T09:30:57.500000Z")
        );
    }

    proptest! {
        /// Text order is time order, and text round-trips.
        #[test]
        fn text_order_is_time_order(a in 0i64..4_000_000_000_000_000, b in 0i64..4_000_000_000_000_000) {
            let ta = Timestamp::from(DateTime::<Utc>::from_timestamp_micros(a).expect("a"));
            let tb = Timestamp::from(DateTime::<Utc>::from_timestamp_micros(b).expect("b"));
            prop_assert_eq!(ta.cmp(&tb), ta.to_rfc3339().cmp(&tb.to_rfc3339()));
            prop_assert_eq!(ta.to_rfc3339().parse::<Timestamp>().expect("round trip"), ta);
        }
    }
}
