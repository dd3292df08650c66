//! [`strip_ansi`]: colour codes out of a log line read back from another process.

/// Removes ANSI CSI sequences (`ESC [ … final-byte`), e.g. colours, from one line.
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameter and intermediate bytes, then one final byte in @..=~.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_stripped_from_forwarded_lines() {
        let coloured =
            "\u{1b}[2m2026-11-30T02:16:09Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m agentctl listening";
        assert_eq!(
            strip_ansi(coloured),
            "2026-11-30T02:16:09Z  INFO agentctl listening"
        );
    }

    proptest::proptest! {
        #[test]
        fn stripping_keeps_plain_text_and_removes_every_colour(
            parts in proptest::collection::vec("[^\u{1b}]{0,12}", 1..8),
            codes in proptest::collection::vec(0u8..108, 1..8),
        ) {
            let plain: String = parts.concat();
            proptest::prop_assert_eq!(strip_ansi(&plain), plain.clone());
            let coloured: String = parts
                .iter()
                .zip(codes.iter().cycle())
                .map(|(part, code)| format!("\u{1b}[{code};1m{part}\u{1b}[0m"))
                .collect();
            proptest::prop_assert_eq!(strip_ansi(&coloured), plain);
        }
    }
}
