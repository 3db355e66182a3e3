//! Credentials kept out of every message: the core's errors, the CLI's reports, every door.
//!
//! A store is named by a URL that may carry a password (`mysql://root:PW@db/leases`) or an
//! S3 key pair (`s3://KEY:SECRET@bucket/prefix`), and an operator's typo (a leading space,
//! `mysql//`, `mysql:/`) turns such a URL into a path, which messages quote as it is. So
//! rather than trust every place that quotes an argument, every error's text (and every
//! report the CLI prints) passes through [`mask`], which recognizes the shape of a credential wherever it appears:
//!
//! - `user:password@` (and S3's `KEY:SECRET@`): everything between the scheme (`scheme://`,
//!   `scheme:/`, `scheme//`, or nothing) and the last `@` of a word, when it holds a `:`,
//!   becomes `***`; the scheme and what follows the `@` (the host, the bucket) stay, so the
//!   message still says which store it is about;
//! - `?name=value` and `&name=value` where the name says it is secret (`password`, `secret`,
//!   `token`, `key`, `credential`, `signature`, `sig`): the value becomes `***`.
//!
//! A word ends at white space only: a password may hold `/`, `@`, `'` or `=`, which a
//! sloppier rule would take for the end of it and leave half shown. Text without a `:`
//! before its `@` (`replica@host`, a mail address) is left as it is.

use std::borrow::Cow;

/// What a secret is replaced with.
pub const MASK: &str = "***";

/// Query parameter names that hold a secret, matched as parts of the lowercased name
/// (`X-Amz-Signature`, `session_token`, `access_key_id`).
const SECRET_NAMES: [&str; 7] = [
    "password",
    "secret",
    "token",
    "key",
    "credential",
    "signature",
    "sig",
];

/// `text` with every credential it holds replaced by [`MASK`] (see the module documentation).
pub fn mask(text: &str) -> Cow<'_, str> {
    if !text.contains(['@', '=']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let space = rest.find(|c: char| !c.is_whitespace()).unwrap_or(rest.len());
        out.push_str(&rest[..space]);
        rest = &rest[space..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        mask_word(&rest[..end], &mut out);
        rest = &rest[end..];
    }
    if out == text {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(out)
    }
}

/// One word (no white space in it), masked onto `out`.
fn mask_word(word: &str, out: &mut String) {
    let mut word: Cow<'_, str> = Cow::Borrowed(word);
    if let Some(at) = word.rfind('@') {
        let start = userinfo_start(&word[..at]);
        if word[start..at].contains(':') {
            word = Cow::Owned(format!("{}{MASK}{}", &word[..start], &word[at..]));
        }
    }
    out.push_str(&mask_query(&word));
}

/// Where the credential before an `@` begins: after the first scheme separator (`://`,
/// `:/`, `//`) that follows something shaped like a scheme at the start of the word or
/// after a quote, bracket or `=`; at the start of the word when there is none. The scheme
/// must stand there on its own so that `//` or `:/` inside a password is not taken for one.
fn userinfo_start(before_at: &str) -> usize {
    let bytes = before_at.as_bytes();
    let opens = |b: u8| matches!(b, b'\'' | b'"' | b'`' | b'(' | b'[' | b'{' | b'<' | b'=' | b',');
    for i in 0..bytes.len() {
        let separator = match bytes[i] {
            b':' if bytes.get(i + 1) == Some(&b'/') => 1,
            b'/' if bytes.get(i + 1) == Some(&b'/') => 0,
            _ => continue,
        };
        let scheme_start = before_at[..i]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |p| p + 1);
        let scheme = &bytes[scheme_start..i];
        let stands_alone = scheme_start == 0 || opens(bytes[scheme_start - 1]);
        if scheme.first().is_some_and(u8::is_ascii_alphabetic) && stands_alone {
            let mut start = i + separator;
            while bytes.get(start) == Some(&b'/') {
                start += 1;
            }
            return start;
        }
    }
    // No scheme: the credential is the whole word, less what an `=` before its `:` assigns
    // it to (`--owner=`) and an opening quote or bracket.
    let colon = before_at.find(':').unwrap_or(before_at.len());
    let base = before_at[..colon].rfind('=').map_or(0, |p| p + 1);
    base + bytes[base..].iter().take_while(|&&b| opens(b)).count()
}

/// The values of secret-named query parameters masked.
fn mask_query(word: &str) -> Cow<'_, str> {
    if !word.contains('=') {
        return Cow::Borrowed(word);
    }
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(p) = rest.find(['?', '&']) {
        out.push_str(&rest[..=p]);
        rest = &rest[p + 1..];
        let end = rest.find('&').unwrap_or(rest.len());
        match rest[..end].split_once('=') {
            Some((name, value)) if !value.is_empty() && is_secret_name(name) => {
                out.push_str(name);
                out.push('=');
                out.push_str(MASK);
                // A value quoted in a message keeps its closing quote.
                let closing = value.len()
                    - value
                        .trim_end_matches(['\'', '"', '`', ')', ']', '}', '>', ','])
                        .len();
                out.push_str(&value[value.len() - closing..]);
            }
            _ => out.push_str(&rest[..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// A store's URL or path as messages name it, masked. A value with white space in it as well
/// as a credential's `:` and `@` is named by its scheme only: a raw space in a password would
/// end the word that [`mask`] masks, and leave the rest of the password in view.
pub fn shown_argument(value: &str) -> Cow<'_, str> {
    let credential_shaped = value
        .rsplit_once('@')
        .is_some_and(|(before, _)| before.contains(':'));
    if credential_shaped && value.trim().contains(char::is_whitespace) {
        let scheme = value.trim_start().split([':', '/']).next().unwrap_or("");
        return Cow::Owned(format!(
            "{scheme}:*** (the rest is not shown: it may hold a credential)"
        ));
    }
    mask(value)
}

/// Whether a query parameter called `name` holds a secret: the one list every masker asks.
pub fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_NAMES.iter().any(|secret| name.contains(secret))
}

/// Every string in `value` masked, so that a JSON report carries no more than the text one.
pub fn mask_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) => {
            if let Cow::Owned(masked) = mask(text) {
                *text = masked;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(mask_json),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(mask_json),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_masked_in_every_shape_of_url() {
        let cases = [
            ("mysql://root:PW@db:3306/leases", "mysql://***@db:3306/leases"),
            (" mysql://root:PW@db/x", " mysql://***@db/x"),
            ("mysql//root:PW@db/x", "mysql//***@db/x"),
            ("mysql:/root:PW@db/x", "mysql:/***@db/x"),
            ("mysql:///root:PW@db/x", "mysql:///***@db/x"),
            ("root:PW@db/x", "***@db/x"),
            ("mysql:root:PW@db/x", "***@db/x"),
            ("mysql://:PW@db/x", "mysql://***@db/x"),
            ("s3://AKIA:wJa/lr//K7@bucket/p", "s3://***@bucket/p"),
            ("s3://AKIA:a@b:c@bucket", "s3://***@bucket"),
            ("AKIA:se:/cret@bucket", "***@bucket"),
            ("'mysql//root:PW@db/x'", "'mysql//***@db/x'"),
            ("'root:PW@db'", "'***@db'"),
            ("--store=mysql://root:PW@db/x", "--store=mysql://***@db/x"),
            ("--owner=root:PW@db", "--owner=***@db"),
            ("(root:PW@db)", "(***@db)"),
            (
                "at mysql//root:PW@db/x: No such file or directory",
                "at mysql//***@db/x: No such file or directory",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(mask(text), expected, "{text}");
        }
    }

    #[test]
    fn secret_query_values_are_masked() {
        assert_eq!(
            mask("s3://b/p?endpoint=http://h:9000&region=eu&X-Amz-Signature=abc&session_token=T0K"),
            "s3://b/p?endpoint=http://h:9000&region=eu&X-Amz-Signature=***&session_token=***"
        );
        assert_eq!(mask("'mysql://h/db?password=PW'"), "'mysql://h/db?password=***'");
        assert_eq!(
            mask("mysql://h/db?prefix=gotry_&timeout_ms=5"),
            "mysql://h/db?prefix=gotry_&timeout_ms=5"
        );
    }

    #[test]
    fn text_without_a_credential_is_left_alone() {
        for text in [
            "acme/t-0123: epoch 1 is not held by replica-b",
            "replica@host holds it",
            "alice@example.com",
            "https://idp.example/a@b",
            "key=acme/t-1 epoch=3",
            "",
        ] {
            assert!(matches!(mask(text), Cow::Borrowed(_)), "{text}");
        }
    }

    #[test]
    fn an_argument_with_white_space_in_its_credential_is_not_shown() {
        assert_eq!(shown_argument(" mysql://root:PW@db/x"), " mysql://***@db/x");
        let shown = shown_argument("mysql://root:P W@db/x");
        assert!(shown.starts_with("mysql:***") && !shown.contains('P'), "{shown}");
        assert_eq!(shown_argument("/srv/my copies"), "/srv/my copies");
        assert_eq!(shown_argument("/srv/a b/c@d"), "/srv/a b/c@d");
    }

    #[test]
    fn json_strings_are_masked_at_any_depth() {
        let mut value = serde_json::json!({
            "message": "no lease store at mysql//root:PW@db/x",
            "record": { "owner": "u:PW@h", "epoch": 3 },
            "list": ["s3://K:S@b"],
        });
        mask_json(&mut value);
        let shown = value.to_string();
        assert!(!shown.contains("PW") && !shown.contains("K:S"), "{shown}");
        assert_eq!(value["record"]["epoch"], 3);
        assert_eq!(value["list"][0], "s3://***@b");
    }
}
