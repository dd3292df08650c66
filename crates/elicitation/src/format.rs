//! The JSON Schema `format`s an answer is checked against: `email`, `uri`, `date`,
//! `date-time`. Deliberately simple structural checks (the UI validates the same
//! way); any other format is not checked.

/// Whether `text` fits `format`; `None` when the format is not one we check.
pub(crate) fn matches(format: &str, text: &str) -> Option<bool> {
    Some(match format {
        "email" => is_email(text),
        "uri" => is_uri(text),
        "date" => is_date(text),
        "date-time" => is_date_time(text),
        _ => return None,
    })
}

/// `local@domain`: one `@`, both sides non-empty, no whitespace, and a domain that
/// neither starts nor ends with a dot.
fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !domain.contains('@')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !text.chars().any(char::is_whitespace)
}

/// An absolute URI: `scheme:rest`, scheme per RFC 3986, something after the colon,
/// no whitespace.
fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// RFC 3339 `full-date`: `YYYY-MM-DD`, a real calendar day.
fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) =
        (digits(&b[0..4]), digits(&b[5..7]), digits(&b[8..10]))
    else {
        return false;
    };
    (1..=12).contains(&month) && day >= 1 && day <= days_in_month(year, month)
}

/// RFC 3339 `date-time`: `full-date T HH:MM:SS[.frac] (Z | ±HH:MM)`.
fn is_date_time(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let b = time.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (Some(h), Some(m), Some(s)) = (digits(&b[0..2]), digits(&b[3..5]), digits(&b[6..8])) else {
        return false;
    };
    // 60 admits a leap second.
    if h > 23 || m > 59 || s > 60 {
        return false;
    }
    let mut rest = &b[8..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => matches!(
            (digits(&[*h1, *h2]), digits(&[*m1, *m2])),
            (Some(h), Some(m)) if h <= 23 && m <= 59
        ),
        _ => false,
    }
}

fn digits(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn email() {
        for ok in ["a@b.c", "first.last@localhost"] {
            assert_eq!(matches("email", ok), Some(true), "{ok}");
        }
        for bad in ["", "a", "@b", "a@", "a@b@c", "a b@c", "a@.b", "a@b."] {
            assert_eq!(matches("email", bad), Some(false), "{bad}");
        }
    }

    #[test]
    fn uri() {
        for ok in [
            "https://example.com/x?y",
            "mailto:a@b",
            "urn:isbn:1",
            "a+b-c.d:x",
        ] {
            assert_eq!(matches("uri", ok), Some(true), "{ok}");
        }
        for bad in [
            "example.com",
            "/path",
            "1http://x",
            "http:",
            "http://a b",
            ":x",
        ] {
            assert_eq!(matches("uri", bad), Some(false), "{bad}");
        }
    }

    #[test]
    fn date() {
        for ok in ["2024-02-29", "2000-02-29", "1999-12-31"] {
            assert_eq!(matches("date", ok), Some(true), "{ok}");
        }
        for bad in [
            "2023-02-29",
            "1900-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-04-31",
            "24-01-01",
            "2024-1-01",
            "2024/01/01",
            "２０２４-01-01",
        ] {
            assert_eq!(matches("date", bad), Some(false), "{bad}");
        }
    }

    #[test]
    fn date_time() {
        for ok in [
            "2024-05-06T07:08:09Z",
            "2024-05-06t23:59:60.123+05:30",
            "2024-05-06T00:00:00-00:00",
        ] {
            assert_eq!(matches("date-time", ok), Some(true), "{ok}");
        }
        for bad in [
            "2024-05-06",
            "2024-05-06T07:08:09",
            "2024-05-06T24:00:00Z",
            "2024-05-06T07:08:09.Z",
            "2024-05-06T07:08:09+0530",
            "2024-05-06 07:08:09Z",
        ] {
            assert_eq!(matches("date-time", bad), Some(false), "{bad}");
        }
    }

    #[test]
    fn unknown_formats_are_not_checked() {
        assert_eq!(matches("hostname", "!!"), None);
    }
}
