//! The stored enums bind themselves as their text names (`status = 'pending'`), on every
//! engine: what the column holds is [`as_str`](crate::model::SessionState::as_str), and a
//! name the enum does not know reads back as a decode error, never a default.

/// `sqlx::Type`, `Encode` and `Decode` as text for each `Enum => parse` given, where
/// `parse: fn(&str) -> Option<Enum>` and the enum has `as_str(self) -> &'static str`.
macro_rules! stored_as_text {
    ($($ty:ty => $parse:expr),* $(,)?) => {$(
        impl<DB: sqlx::Database> sqlx::Type<DB> for $ty
        where
            str: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $ty
        where
            &'q str: sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut DB::ArgumentBuffer<'q>,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&'q str as sqlx::Encode<'q, DB>>::encode(self.as_str(), buf)
            }
        }

        impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $ty
        where
            &'r str: sqlx::Decode<'r, DB>,
        {
            fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                let text = <&'r str as sqlx::Decode<'r, DB>>::decode(value)?;
                let parse: fn(&str) -> Option<$ty> = $parse;
                parse(text).ok_or_else(|| {
                    format!("unknown {} `{text}`", stringify!($ty)).into()
                })
            }
        }
    )*};
}

use crate::model::{
    ClarificationStatus, DeliveryStatus, MessageKind, Outcome, SessionState, SettledBy, Source,
};

stored_as_text! {
    Source => Source::parse,
    ClarificationStatus => ClarificationStatus::parse,
    Outcome => Outcome::parse,
    SettledBy => SettledBy::parse,
    MessageKind => MessageKind::parse,
    SessionState => |s| s.parse().ok(),
    DeliveryStatus => DeliveryStatus::parse,
}
