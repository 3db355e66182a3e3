//! How records, times and tables look, for people and for scripts.
//!
//! JSON uses the reference implementation's camelCase field names, so that a script written
//! against the Node.js package reads the CLI's output with the same names.

use std::borrow::Cow;

use gotry_tenant_state::{HistoryEntry, LeaseRecord, SkipReason, SkippedCopy};
use serde_json::{json, Value};

/// Text from the store or the command line as it can be shown on a terminal: every character
/// that is invisible or acts on the text around it is escaped (see [`is_hidden`]), so a key
/// or owner cannot break a table, split a one-line error report, send escape sequences to the
/// terminal, reorder what follows it, or pass for another that looks the same. Control
/// characters keep their short escapes (`\n`, `\t`), the others read `\u{202e}`. JSON output
/// is exact: escaping is its reader's business.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else if is_hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A character a terminal would not show as itself: a control character (Cc), a format
/// character (Cf: zero-width spaces and joiners, bidi marks, embeddings, overrides and
/// isolates, the byte order mark, tags), the line and paragraph separators (U+2028, U+2029),
/// or any other default-ignorable code point (Hangul fillers, variation selectors, ...), the
/// characters Unicode says are drawn as nothing. Written out here as of Unicode 16.0, because
/// std has no table of general categories and these ranges change rarely.
pub fn is_hidden(c: char) -> bool {
    const HIDDEN: &[(u32, u32)] = &[
        (0x00AD, 0x00AD),   // soft hyphen
        (0x034F, 0x034F),   // combining grapheme joiner
        (0x0600, 0x0605),   // Arabic number signs (Cf)
        (0x061C, 0x061C),   // Arabic letter mark
        (0x06DD, 0x06DD),   // Arabic end of ayah (Cf)
        (0x070F, 0x070F),   // Syriac abbreviation mark (Cf)
        (0x0890, 0x0891),   // Arabic pound and piastre marks above (Cf)
        (0x08E2, 0x08E2),   // Arabic disputed end of ayah (Cf)
        (0x115F, 0x1160),   // Hangul choseong and jungseong fillers
        (0x17B4, 0x17B5),   // Khmer inherent vowels
        (0x180B, 0x180F),   // Mongolian variation selectors and vowel separator
        (0x200B, 0x200F),   // zero width space, non-joiner, joiner; LRM, RLM
        (0x2028, 0x202E),   // line and paragraph separators; bidi embeddings and overrides
        (0x2060, 0x206F),   // word joiner, invisible operators, bidi isolates, deprecated formats
        (0x3164, 0x3164),   // Hangul filler
        (0xFE00, 0xFE0F),   // variation selectors
        (0xFEFF, 0xFEFF),   // zero width no-break space (byte order mark)
        (0xFFA0, 0xFFA0),   // halfwidth Hangul filler
        (0xFFF0, 0xFFFB),   // unassigned default-ignorables; interlinear annotation (Cf)
        (0x110BD, 0x110BD), // Kaithi number sign (Cf)
        (0x110CD, 0x110CD), // Kaithi number sign above (Cf)
        (0x13430, 0x1343F), // Egyptian hieroglyph format controls (Cf)
        (0x1BCA0, 0x1BCA3), // shorthand format controls (Cf)
        (0x1D173, 0x1D17A), // musical symbol beam and slur formats (Cf)
        (0xE0000, 0xE0FFF), // tags, variation selectors supplement, reserved default-ignorables
    ];
    let code = u32::from(c);
    c.is_control() || HIDDEN.iter().any(|&(low, high)| (low..=high).contains(&code))
}

/// A duration rounded down to the unit people read at a glance: "850 ms", "12 s", "3 min".
pub fn span(ms: u64) -> String {
    const SECOND: u64 = 1_000;
    const MINUTE: u64 = 60 * SECOND;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    // Below twice a unit the smaller unit is kept: "90 s" says more than "1 min".
    if ms < SECOND {
        format!("{ms} ms")
    } else if ms < 2 * MINUTE {
        format!("{} s", ms / SECOND)
    } else if ms < 2 * HOUR {
        format!("{} min", ms / MINUTE)
    } else if ms < 2 * DAY {
        format!("{} h", ms / HOUR)
    } else {
        format!("{} d", ms / DAY)
    }
}

/// A lease's end relative to now: "expires in 12 s" or "expired 3 min ago". Whether it has
/// ended is the core's rule ([`LeaseRecord::is_expired_at`]), as for `held` in the JSON.
pub fn expiry(record: &LeaseRecord, now_ms: i64) -> String {
    let delta = record.lease_until_ms.saturating_sub(now_ms);
    if !record.is_expired_at(now_ms) {
        format!("expires in {}", span(delta.unsigned_abs()))
    } else if delta == 0 {
        "expired just now".to_owned()
    } else {
        format!("expired {} ago", span(delta.unsigned_abs()))
    }
}

/// A past moment relative to now: "3 min ago" ("in 2 s" when the store's clock is behind).
pub fn ago(at_ms: i64, now_ms: i64) -> String {
    let delta = now_ms.saturating_sub(at_ms);
    if delta >= 0 {
        format!("{} ago", span(delta.unsigned_abs()))
    } else {
        format!("in {}", span(delta.unsigned_abs()))
    }
}

/// Milliseconds since the Unix epoch as UTC ISO 8601 with milliseconds, e.g.
/// `2026-03-01T12:00:03.120Z`. Written out here because this is the only calendar
/// arithmetic the tool needs.
pub fn utc(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let of_day = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3_600_000,
        of_day / 60_000 % 60,
        of_day / 1_000 % 60,
        of_day % 1_000
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`), valid over the whole range of `i64` milliseconds.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Columns padded to their widest cell, two spaces apart; cells must be printable already.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (cell, width) in row.iter().zip(&widths) {
            line.push_str(&format!("{cell:<width$}  "));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A record with the reference's field names.
pub fn record_json(record: &LeaseRecord) -> Value {
    json!({
        "key": record.key,
        "owner": record.owner,
        "epoch": record.epoch,
        "leaseUntilMs": record.lease_until_ms,
        "forgottenAtEpoch": record.forgotten_at_epoch,
    })
}

/// A record as seen at `now_ms` on the store's clock: whether it holds the tenant (the core's
/// rule, [`LeaseRecord::is_expired_at`]), and the milliseconds until it expires (negative
/// once it has).
pub fn record_at_json(record: &LeaseRecord, now_ms: i64) -> Value {
    let mut value = record_json(record);
    value["held"] = (!record.is_expired_at(now_ms)).into();
    value["expiresInMs"] = record.lease_until_ms.saturating_sub(now_ms).into();
    value
}

/// A log entry with the reference's field names.
pub fn history_json(entry: &HistoryEntry) -> Value {
    json!({
        "key": entry.key,
        "op": entry.op.as_str(),
        "owner": entry.owner,
        "epoch": entry.epoch,
        "atMs": entry.at_ms,
    })
}

/// A copy a restore passed over, with the names the Node binding uses: `{epoch, seq, reason}`.
pub fn skipped_json(copy: &SkippedCopy) -> Value {
    json!({ "epoch": copy.id.epoch, "seq": copy.id.seq, "reason": copy.reason.as_str() })
}

/// What a reason to pass over a copy means, beside its code, so that a verdict can be acted on
/// without the manual.
pub fn reason_meaning(reason: SkipReason) -> &'static str {
    match reason {
        SkipReason::Manifest => {
            "the manifest is missing, does not parse, contradicts its place, or names paths a restore \
             cannot lay out (one twice, one under a file, a name the file system cannot hold)"
        }
        SkipReason::Tenant => "the manifest names another tenant",
        SkipReason::Checksum => "a file is missing, or its size or SHA-256 differs from the manifest",
        SkipReason::Integrity => "a SQLite file fails PRAGMA integrity_check",
        SkipReason::Fold => "the host's own check of the restored state refused it",
        SkipReason::Superseded => {
            "written into an older epoch after a later tenure began: a stale holder's copy"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_pick_a_readable_unit() {
        let cases = [
            (0, "0 ms"),
            (999, "999 ms"),
            (1_000, "1 s"),
            (12_400, "12 s"),
            (119_999, "119 s"),
            (120_000, "2 min"),
            (3 * 60_000 + 59_000, "3 min"),
            (7_199_999, "119 min"),
            (7_200_000, "2 h"),
            (47 * 3_600_000, "47 h"),
            (48 * 3_600_000, "2 d"),
            (u64::MAX, "213503982334 d"),
        ];
        for (ms, expected) in cases {
            assert_eq!(span(ms), expected, "{ms} ms");
        }
    }

    #[test]
    fn expiry_and_age_read_both_ways() {
        let until = |lease_until_ms| LeaseRecord {
            key: "k".into(),
            owner: "o".into(),
            epoch: 1,
            lease_until_ms,
            forgotten_at_epoch: 0,
        };
        assert_eq!(expiry(&until(12_500), 500), "expires in 12 s");
        assert_eq!(expiry(&until(1), 0), "expires in 1 ms");
        assert_eq!(expiry(&until(500), 500), "expired just now");
        assert_eq!(expiry(&until(0), 180_000), "expired 3 min ago");
        // Absurd records saturate instead of overflowing.
        assert_eq!(expiry(&until(i64::MIN), i64::MAX), "expired 106751991167 d ago");
        assert_eq!(ago(0, 180_000), "3 min ago");
        assert_eq!(ago(2_000, 0), "in 2 s");
    }

    #[test]
    fn utc_matches_known_dates() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (951_868_799_999, "2000-02-29T23:59:59.999Z"),
            (1_767_225_600_000, "2026-01-01T00:00:00.000Z"),
            (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),
            (1_709_164_800_123, "2024-02-29T00:00:00.123Z"),
        ];
        for (ms, expected) in cases {
            assert_eq!(utc(ms), expected, "{ms}");
        }
        // The extremes of the range format without overflowing.
        assert!(utc(i64::MAX).ends_with(".807Z"));
        assert!(utc(i64::MIN).ends_with(".192Z"));
    }

    #[test]
    fn printable_escapes_control_characters() {
        assert!(matches!(printable("acme/t-1 é 😀"), Cow::Borrowed(_)));
        assert_eq!(printable("a\nb\tc\u{7}"), "a\\nb\\tc\\u{7}");
        assert_eq!(printable("\u{85}\u{9b}31m"), "\\u{85}\\u{9b}31m");
    }

    #[test]
    fn printable_escapes_invisible_and_bidi_characters() {
        let cases = [
            ("owner\u{202e}gnp.exe", "owner\\u{202e}gnp.exe"),
            ("a\u{200b}b", "a\\u{200b}b"),
            ("line\u{2028}para\u{2029}", "line\\u{2028}para\\u{2029}"),
            (
                "\u{2066}x\u{2069}\u{200e}\u{200f}\u{61c}",
                "\\u{2066}x\\u{2069}\\u{200e}\\u{200f}\\u{61c}",
            ),
            ("\u{feff}bom\u{ad}", "\\u{feff}bom\\u{ad}"),
            ("\u{3164}\u{115f}", "\\u{3164}\\u{115f}"),
            ("tag\u{e0041}", "tag\\u{e0041}"),
        ];
        for (raw, shown) in cases {
            assert_eq!(printable(raw), shown, "{raw:?}");
        }
        // Visible text outside ASCII is left alone, spaces and marks that draw included.
        for visible in ["é e\u{301} ñ", "日本語", "مرحبا", "\u{a0}nbsp", "😀"] {
            assert!(matches!(printable(visible), Cow::Borrowed(_)), "{visible:?}");
        }
    }

    #[test]
    fn tables_align_on_the_widest_cell() {
        let rows = vec![
            vec!["acme/t-1".to_owned(), "é".to_owned(), "3".to_owned()],
            vec!["b".to_owned(), "replica-a".to_owned(), "12".to_owned()],
        ];
        let text = table(&["KEY", "OWNER", "EPOCH"], &rows);
        assert_eq!(
            text,
            "KEY       OWNER      EPOCH\nacme/t-1  é          3\nb         replica-a  12\n"
        );
    }

    #[test]
    fn held_follows_the_store_rule() {
        let record = LeaseRecord {
            key: "k".into(),
            owner: "o".into(),
            epoch: 1,
            lease_until_ms: 100,
            forgotten_at_epoch: 0,
        };
        assert_eq!(record_at_json(&record, 99)["held"], true);
        assert_eq!(record_at_json(&record, 100)["held"], false);
        let value = record_at_json(&record, 130);
        assert_eq!(value["held"], false);
        assert_eq!(value["expiresInMs"], -30);
        assert_eq!(value["leaseUntilMs"], 100);
    }
}
