//! The ids kandev gives its records. They are time-ordered (UUIDv7), so a new row goes at
//! the end of its primary-key index. With random ids (v4) each new row went into a random
//! page of the index, and every checkpoint had to write back pages from all over it: more
//! pages as the file grew, and the soak's p99 grew with them (docs/decisions/0023).

/// A new record id: a UUIDv7 in hyphenated text, later than every id this process made.
pub fn new_record_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

#[cfg(test)]
mod tests {
    use super::new_record_id;

    #[test]
    fn record_ids_sort_in_the_order_they_were_made() {
        let ids: Vec<String> = (0..10_000).map(|_| new_record_id()).collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1], "{} then {}", pair[0], pair[1]);
        }
        let id = uuid::Uuid::parse_str(&ids[0]).expect("a UUID");
        assert_eq!(id.get_version_num(), 7);
    }
}
