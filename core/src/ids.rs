//! Organization and tenant identifiers.
//!
//! A ledger tenant is one end user, an organization the party that deploys the agent.
//! The tenant id is derived in the trusted seam from the authenticated principal and is
//! never taken from a payload, a tool or the model; every path of the state layer is built
//! from ids that passed these validators and from nothing else. That is why the rules are
//! strict and anchored at the true end of the string: a trailing newline that a lax
//! `$` would let through becomes a different directory.

use std::fmt;
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::errors::{Error, Result};
use crate::paths::{assert_path, resolve_lexically};

/// Smallest accepted organization key: a shorter key would make ids guessable.
pub const MIN_ORGANIZATION_KEY_BYTES: usize = 32;
/// Largest accepted issuer or subject, in UTF-8 bytes.
pub const MAX_CLAIM_BYTES: usize = 512;
/// Length of a ledger tenant id: `t-` and 32 hex digits.
pub const LEDGER_TENANT_ID_LEN: usize = 34;
/// Length of a prompt cache partition: `pc-` and 32 hex digits.
pub const PROMPT_CACHE_PARTITION_LEN: usize = 35;
/// Longest organization id.
pub const MAX_ORGANIZATION_ID_LEN: usize = 63;

const CACHE_PARTITION_CONTEXT: &[u8] = b"gotry/prompt-cache-partition/v1";
const CLAIM_SEPARATOR: &[u8] = &[0];

/// A per-organization server-side key, ready to derive ids.
///
/// The HMAC key schedule is computed once here, so a derivation costs only the message
/// blocks. The key itself is not kept; the precomputed state is key-equivalent, so it is
/// wiped when dropped (as is every per-derivation copy) and never printed.
#[derive(Clone)]
pub struct OrganizationKey {
    mac: Hmac<Sha256>,
}

impl OrganizationKey {
    /// Accepts a key of at least [`MIN_ORGANIZATION_KEY_BYTES`] bytes.
    pub fn new(key: &[u8]) -> Result<OrganizationKey> {
        if key.len() < MIN_ORGANIZATION_KEY_BYTES {
            return Err(Error::id_invalid(format!(
                "an organization key needs at least {MIN_ORGANIZATION_KEY_BYTES} bytes, got {}",
                key.len()
            )));
        }
        let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key)
            .map_err(|_| Error::id_invalid("the organization key was refused by HMAC-SHA256"))?;
        Ok(OrganizationKey { mac })
    }

    /// `t-` + the first 128 bits of HMAC-SHA256(key, issuer 0x00 subject), in lowercase hex.
    ///
    /// Claims are compared byte for byte as the identity provider issued them: no Unicode
    /// normalization, so two spellings that render alike are two tenants.
    pub fn derive_ledger_tenant_id(&self, issuer: &str, subject: &str) -> Result<String> {
        let issuer = claim_bytes("issuer", issuer)?;
        let subject = claim_bytes("subject", subject)?;
        Ok(self.label("t-", &[issuer, CLAIM_SEPARATOR, subject]))
    }

    /// `pc-` + the first 128 bits of HMAC-SHA256(key, context 0x00 ledger tenant id).
    ///
    /// The label that every planner prompt of one tenant carries ahead of anything the
    /// tenant controls. Its own context string keeps it apart from the tenant id itself,
    /// and the key keeps anyone without it from computing another tenant's label.
    pub fn derive_prompt_cache_partition(&self, ledger_tenant_id: &str) -> Result<String> {
        let tenant = assert_ledger_tenant_id(ledger_tenant_id)?;
        Ok(self.label(
            "pc-",
            &[CACHE_PARTITION_CONTEXT, CLAIM_SEPARATOR, tenant.as_bytes()],
        ))
    }

    fn label(&self, prefix: &str, parts: &[&[u8]]) -> String {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(part);
        }
        let digest = mac.finalize().into_bytes();
        let mut out = String::with_capacity(prefix.len() + 32);
        out.push_str(prefix);
        for byte in &digest[..16] {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push(HEX[usize::from(byte >> 4)] as char);
            out.push(HEX[usize::from(byte & 0x0f)] as char);
        }
        out
    }
}

impl fmt::Debug for OrganizationKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OrganizationKey(<redacted>)")
    }
}

/// A claim's UTF-8 bytes once it passed every rule, in the order the reference checks them.
fn claim_bytes<'a>(name: &str, value: &'a str) -> Result<&'a [u8]> {
    if value.is_empty() {
        return Err(Error::id_invalid(format!("{name} must be a non-empty string")));
    }
    if value.contains('\0') {
        return Err(Error::id_invalid(format!(
            "{name} must not contain a NUL character"
        )));
    }
    if value.len() > MAX_CLAIM_BYTES {
        return Err(Error::id_invalid(format!(
            "{name} is {} bytes of UTF-8, the limit is {MAX_CLAIM_BYTES}",
            value.len()
        )));
    }
    Ok(value.as_bytes())
}

/// Decodes a host's UTF-16 claim strictly: a lone surrogate is refused, never replaced,
/// because a replacement would let two different subjects share one tenant.
pub fn claim_from_utf16(name: &str, units: &[u16]) -> Result<String> {
    String::from_utf16(units).map_err(|_| {
        Error::id_invalid(format!(
            "{name} must be well-formed Unicode (it holds a lone surrogate)"
        ))
    })
}

/// Decodes a host's UTF-8 claim strictly: bytes that are not UTF-8 are refused.
pub fn claim_from_utf8<'a>(name: &str, bytes: &'a [u8]) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|_| Error::id_invalid(format!("{name} must be well-formed UTF-8")))
}

/// Derives a ledger tenant id from a raw key: [`OrganizationKey::derive_ledger_tenant_id`]
/// for a host that holds the key as bytes.
pub fn derive_ledger_tenant_id(organization_key: &[u8], issuer: &str, subject: &str) -> Result<String> {
    OrganizationKey::new(organization_key)?.derive_ledger_tenant_id(issuer, subject)
}

/// Derives a prompt cache partition from a raw key.
pub fn derive_prompt_cache_partition(organization_key: &[u8], ledger_tenant_id: &str) -> Result<String> {
    OrganizationKey::new(organization_key)?.derive_prompt_cache_partition(ledger_tenant_id)
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn is_lower_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

fn hex_label_ok(value: &str, prefix: &str) -> bool {
    value.len() == prefix.len() + 32
        && value.starts_with(prefix)
        && value.as_bytes()[prefix.len()..].iter().all(|&b| is_lower_hex(b))
}

/// `^[a-z0-9][a-z0-9-]{0,62}$`, anchored at the true end.
pub fn assert_organization_id(value: &str) -> Result<&str> {
    let bytes = value.as_bytes();
    let ok = matches!(bytes.first(), Some(&b) if is_lower_alnum(b))
        && bytes.len() <= MAX_ORGANIZATION_ID_LEN
        && bytes.iter().all(|&b| is_lower_alnum(b) || b == b'-');
    if ok {
        Ok(value)
    } else {
        Err(Error::id_invalid(
            "an organization id is 1 to 63 characters of a-z, 0-9 and '-', not starting with '-'",
        ))
    }
}

/// `^t-[0-9a-f]{32}$`, anchored at the true end.
pub fn assert_ledger_tenant_id(value: &str) -> Result<&str> {
    if hex_label_ok(value, "t-") {
        Ok(value)
    } else {
        Err(Error::id_invalid(
            "a ledger tenant id is 't-' and 32 lowercase hex digits",
        ))
    }
}

/// `^pc-[0-9a-f]{32}$`, anchored at the true end.
pub fn assert_prompt_cache_partition(value: &str) -> Result<&str> {
    if hex_label_ok(value, "pc-") {
        Ok(value)
    } else {
        Err(Error::id_invalid(
            "a prompt cache partition is 'pc-' and 32 lowercase hex digits",
        ))
    }
}

/// The lease key of one tenant: `<organization>/<ledger tenant>`.
pub fn lease_key_for(organization_id: &str, ledger_tenant_id: &str) -> Result<String> {
    let org = assert_organization_id(organization_id)?;
    let tenant = assert_ledger_tenant_id(ledger_tenant_id)?;
    Ok(format!("{org}/{tenant}"))
}

/// The directory that holds one tenant's complete state root:
/// `<resolved state root>/orgs/<organization>/tenants/<ledger tenant>`.
///
/// The root is resolved lexically, as Node's `path.resolve` does, so every language
/// computes the same path: relative roots against the working directory, `.`, `..` and
/// repeated slashes folded, symlinks left alone (resolving them would make the path
/// depend on the file system at the moment of the call).
pub fn tenant_root_for(state_root: &Path, organization_id: &str, ledger_tenant_id: &str) -> Result<PathBuf> {
    assert_path("a state root", state_root)?;
    let org = assert_organization_id(organization_id)?;
    let tenant = assert_ledger_tenant_id(ledger_tenant_id)?;
    let base = if state_root.is_absolute() {
        PathBuf::new()
    } else {
        std::env::current_dir().map_err(|e| {
            Error::io(
                "the working directory cannot be read to resolve a relative state root",
                &e,
            )
        })?
    };
    let mut root = resolve_lexically(&base.join(state_root));
    for part in ["orgs", org, "tenants", tenant] {
        root.push(part);
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8; 32] = b"0123456789abcdef0123456789abcdef";

    fn key() -> OrganizationKey {
        OrganizationKey::new(KEY).unwrap()
    }

    fn assert_id_invalid<T: fmt::Debug>(result: Result<T>) {
        match result {
            Err(Error::IdInvalid { .. }) => {}
            other => panic!("expected ID_INVALID, got {other:?}"),
        }
    }

    #[test]
    fn organization_ids() {
        for good in ["acme", "a", "0", "a-", "a--b", &"a".repeat(63)] {
            assert_eq!(assert_organization_id(good).unwrap(), good);
        }
        for bad in [
            "acme\n",
            "Acme",
            &"a".repeat(64),
            "-acme",
            "",
            "ac me",
            "acmé",
            "a_b",
            "\nacme",
        ] {
            assert_id_invalid(assert_organization_id(bad));
        }
    }

    #[test]
    fn tenant_ids_and_partitions() {
        let t = format!("t-{}", "0a".repeat(16));
        assert_eq!(assert_ledger_tenant_id(&t).unwrap(), t);
        for bad in [
            format!("{t}\n"),
            t.to_uppercase(),
            format!("t-{}", "0".repeat(31)),
            format!("t-{}", "g".repeat(32)),
            format!("x{t}"),
        ] {
            assert_id_invalid(assert_ledger_tenant_id(&bad));
        }
        let pc = format!("pc-{}", "f".repeat(32));
        assert_eq!(assert_prompt_cache_partition(&pc).unwrap(), pc);
        assert_id_invalid(assert_prompt_cache_partition(&format!("{pc}\n")));
        assert_id_invalid(assert_prompt_cache_partition(&t));
    }

    /// Computed independently with Python's hmac module:
    /// `hmac.new(b"0123456789abcdef0123456789abcdef", b"https://idp.example\0user-1", "sha256").hexdigest()[:32]`.
    #[test]
    fn derivation_matches_an_independent_hmac() {
        let id = key()
            .derive_ledger_tenant_id("https://idp.example", "user-1")
            .unwrap();
        assert_eq!(id, "t-20464cc2afc52b55ccbd6928130a63fd");
        let pc = key().derive_prompt_cache_partition(&id).unwrap();
        assert_eq!(pc, "pc-60e2110c6da3c630ee5bdcbb56ee01f3");
        assert_eq!(
            derive_ledger_tenant_id(KEY, "https://idp.example", "user-1").unwrap(),
            id
        );
        assert_eq!(derive_prompt_cache_partition(KEY, &id).unwrap(), pc);
    }

    #[test]
    fn claims_are_checked() {
        let k = key();
        assert_id_invalid(k.derive_ledger_tenant_id("", "s"));
        assert_id_invalid(k.derive_ledger_tenant_id("i", ""));
        assert_id_invalid(k.derive_ledger_tenant_id("i\0x", "s"));
        assert_id_invalid(k.derive_ledger_tenant_id("i", "s\0"));
        assert!(k.derive_ledger_tenant_id(&"a".repeat(512), "s").is_ok());
        assert_id_invalid(k.derive_ledger_tenant_id(&"a".repeat(513), "s"));
        // 256 two-byte characters are 512 bytes; one more byte is too many.
        assert!(k.derive_ledger_tenant_id("i", &"é".repeat(256)).is_ok());
        assert_id_invalid(k.derive_ledger_tenant_id("i", &format!("{}a", "é".repeat(256))));
        assert_id_invalid(OrganizationKey::new(&[7u8; 31]));
        assert_id_invalid(derive_ledger_tenant_id(&[7u8; 31], "i", "s"));
        assert_id_invalid(k.derive_prompt_cache_partition("t-nope"));
    }

    #[test]
    fn no_normalization() {
        let k = key();
        let composed = k.derive_ledger_tenant_id("i", "\u{e9}").unwrap();
        let decomposed = k.derive_ledger_tenant_id("i", "e\u{301}").unwrap();
        assert_ne!(composed, decomposed);
    }

    #[test]
    fn utf16_claims_refuse_lone_surrogates() {
        assert_id_invalid(claim_from_utf16("subject", &[u16::from(b'a'), 0xD800]));
        assert_id_invalid(claim_from_utf16("subject", &[0xDC00, u16::from(b'a')]));
        let pair: Vec<u16> = "a😀".encode_utf16().collect();
        assert_eq!(claim_from_utf16("subject", &pair).unwrap(), "a😀");
        // The replacement character itself is a valid claim, distinct from any surrogate.
        let fffd: Vec<u16> = "a\u{fffd}".encode_utf16().collect();
        assert_eq!(claim_from_utf16("subject", &fffd).unwrap(), "a\u{fffd}");
        assert_id_invalid(claim_from_utf8("issuer", b"a\xff"));
    }

    #[test]
    fn key_is_never_printed() {
        let shown = format!("{:?}", key());
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
        assert!(shown.contains("redacted"));
    }

    #[test]
    fn precomputed_state_is_wiped_on_drop() {
        // The HMAC state is two SHA-256 cores (inner and outer, each keyed); they are what
        // must be wiped, and they are when the crate's `zeroize` feature is on.
        fn wipes_on_drop<T: zeroize::ZeroizeOnDrop>() {}
        wipes_on_drop::<sha2::block_api::Sha256VarCore>();
    }

    #[test]
    fn tenant_roots_resolve_like_node() {
        let t = format!("t-{}", "a".repeat(32));
        let tail = format!("orgs/acme/tenants/{t}");
        let cwd = std::env::current_dir().unwrap();
        let cases: [(&str, PathBuf); 6] = [
            ("a/./b/../c", cwd.join("a/c")),
            ("//x//y/", PathBuf::from("/x/y")),
            ("", cwd.clone()),
            ("rel", cwd.join("rel")),
            ("/..", PathBuf::from("/")),
            ("/srv/state/../state2/.", PathBuf::from("/srv/state2")),
        ];
        for (root, expected) in cases {
            let got = tenant_root_for(Path::new(root), "acme", &t).unwrap();
            assert_eq!(got, resolve_lexically(&expected).join(&tail), "root {root:?}");
        }
        assert_id_invalid(tenant_root_for(Path::new("/s"), "../etc", &t));
        assert_id_invalid(tenant_root_for(Path::new("/s"), "acme", "t-../../x"));
        assert_eq!(lease_key_for("acme", &t).unwrap(), format!("acme/{t}"));
        assert_id_invalid(lease_key_for("acme", "t-x"));
    }
}
