//! Where the organization key comes from.
//!
//! Never from a command-line argument: other users of the machine can read every process's
//! arguments. The key is read from a file (`--key-file`, or the path in
//! `GOTRY_ORGANIZATION_KEY_FILE`) or from `GOTRY_ORGANIZATION_KEY`, both as hex text, so
//! that the file and the variable hold the same thing and a key survives copy and paste
//! (`openssl rand -hex 32`). Every copy of the key's bytes is wiped when dropped.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use gotry_tenant_state::OrganizationKey;
use zeroize::Zeroizing;

use crate::failure::{Exit, Failure};

pub const KEY_FILE_VAR: &str = "GOTRY_ORGANIZATION_KEY_FILE";
pub const KEY_HEX_VAR: &str = "GOTRY_ORGANIZATION_KEY";

const GENERATE: &str = "generate a key with `openssl rand -hex 32 > org.key && chmod 600 org.key`";

/// Where a key was found, for messages (never the key itself).
enum Source {
    Flag(PathBuf),
    FileVar(PathBuf),
    HexVar,
}

impl Source {
    fn describe(&self) -> String {
        match self {
            Source::Flag(path) => format!("the key file {}", path.display()),
            Source::FileVar(path) => format!("the key file {} (from {KEY_FILE_VAR})", path.display()),
            Source::HexVar => KEY_HEX_VAR.to_owned(),
        }
    }
}

/// The organization key from `--key-file`, else from the environment.
pub fn load(key_file: Option<&Path>) -> Result<OrganizationKey, Failure> {
    load_from(
        key_file,
        std::env::var_os(KEY_FILE_VAR),
        std::env::var_os(KEY_HEX_VAR),
    )
}

fn load_from(
    key_file: Option<&Path>,
    file_var: Option<OsString>,
    hex_var: Option<OsString>,
) -> Result<OrganizationKey, Failure> {
    let invalid =
        |message: String, hint: &str| Failure::new(Exit::Invalid, "ERR_ORGANIZATION_KEY", message, hint);
    let (source, text) = match (key_file, file_var, hex_var) {
        (Some(path), _, _) => {
            let source = Source::Flag(path.to_path_buf());
            let text = read_key_file(path, &source)?;
            (source, text)
        }
        (None, Some(_), Some(_)) => {
            // Two keys and no way to know which one the operator meant: a wrong guess
            // derives ids of tenants that do not exist.
            return Err(invalid(
                format!("both {KEY_FILE_VAR} and {KEY_HEX_VAR} are set"),
                "unset one of them, or pass --key-file",
            ));
        }
        (None, Some(path), None) => {
            let path = PathBuf::from(path);
            let source = Source::FileVar(path.clone());
            let text = read_key_file(&path, &source)?;
            (source, text)
        }
        (None, None, Some(hex)) => {
            let text = hex
                .into_string()
                .map_err(|_| invalid(format!("{KEY_HEX_VAR} is not hex text"), GENERATE))?;
            (Source::HexVar, Zeroizing::new(text.into_bytes()))
        }
        (None, None, None) => {
            return Err(invalid(
                "this command needs the organization key".to_owned(),
                &format!("pass --key-file PATH, or set {KEY_FILE_VAR} (a path) or {KEY_HEX_VAR} (hex)"),
            ))
        }
    };
    let bytes =
        decode_hex(&text).map_err(|what| invalid(format!("{} {what}", source.describe()), GENERATE))?;
    OrganizationKey::new(&bytes).map_err(|error| {
        Failure::from(error)
            .context(format!("the organization key in {}", source.describe()))
            .hint(GENERATE)
    })
}

/// The most a key file may hold. A key is 32 bytes or more, 64 hex digits or more; a few
/// kilobytes of hex and whitespace is already absurd, and the cap keeps a wrong path
/// (`/dev/zero`, a log file, a disk image) from being read into memory without end.
pub const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

fn read_key_file(path: &Path, source: &Source) -> Result<Zeroizing<Vec<u8>>, Failure> {
    let unreadable = |error: std::io::Error| {
        Failure::io(
            Exit::Invalid,
            &error,
            format!("cannot read {}", source.describe()),
            format!("check the path, or {GENERATE}"),
        )
    };
    // A folder is named for what it is; a FIFO or `<(...)` stays allowed (a secret piped in
    // from a vault), so the type is not checked beyond that.
    if std::fs::metadata(path).is_ok_and(|meta| meta.is_dir()) {
        return Err(Failure::new(
            Exit::Invalid,
            "EISDIR",
            format!("{} is a folder, not a file", source.describe()),
            format!("name the file that holds the key, or {GENERATE}"),
        ));
    }
    let file = std::fs::File::open(path).map_err(unreadable)?;
    // One byte past the cap tells a file at the cap from a bigger one without reading on.
    // The buffer is allocated whole, so that no reallocation leaves an unwiped copy behind.
    let mut text = Zeroizing::new(Vec::with_capacity(MAX_KEY_FILE_BYTES as usize + 1));
    file.take(MAX_KEY_FILE_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(unreadable)?;
    if text.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(Failure::new(
            Exit::Invalid,
            "ERR_ORGANIZATION_KEY",
            format!(
                "{} holds more than {MAX_KEY_FILE_BYTES} bytes (64 KiB), the most a key file may hold",
                source.describe()
            ),
            format!("a key file holds the key as hex text and nothing else; {GENERATE}"),
        ));
    }
    Ok(text)
}

/// Hex text to bytes; whitespace around the text (a trailing newline) is allowed, nothing
/// else. The error says what is wrong without quoting any of the key.
fn decode_hex(text: &[u8]) -> Result<Zeroizing<Vec<u8>>, String> {
    let digits = text.trim_ascii();
    if digits.is_empty() {
        return Err("is empty".to_owned());
    }
    if let Some(at) = digits.iter().position(|b| !b.is_ascii_hexdigit()) {
        return Err(format!(
            "is not hex text (byte {at} is not a hex digit); the key is written as hex"
        ));
    }
    if !digits.len().is_multiple_of(2) {
        return Err(format!("holds an odd number of hex digits ({})", digits.len()));
    }
    let nibble = |b: u8| (b as char).to_digit(16).map_or(0, |d| d as u8);
    let mut bytes = Zeroizing::new(Vec::with_capacity(digits.len() / 2));
    bytes.extend(
        digits
            .chunks_exact(2)
            .map(|pair| nibble(pair[0]) << 4 | nibble(pair[1])),
    );
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn failure(result: Result<OrganizationKey, Failure>) -> Failure {
        match result {
            Ok(_) => panic!("expected the key to be refused"),
            Err(failure) => failure,
        }
    }

    #[test]
    fn hex_decodes_exactly() {
        let bytes = decode_hex(b"  00ff7Fa0\n").unwrap();
        assert_eq!(&bytes[..], &[0x00, 0xff, 0x7f, 0xa0]);
        assert!(decode_hex(b"\n").unwrap_err().contains("empty"));
        assert!(decode_hex(b"0g").unwrap_err().contains("byte 1"));
        assert!(decode_hex(b"00 11").unwrap_err().contains("byte 2"));
        assert!(decode_hex(b"abc").unwrap_err().contains("odd"));
    }

    #[test]
    fn the_hex_variable_gives_the_same_key_as_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("org.key");
        std::fs::write(&path, format!("{HEX_KEY}\n")).unwrap();
        let from_file = load_from(Some(&path), None, None).unwrap();
        let from_var = load_from(None, None, Some(HEX_KEY.into())).unwrap();
        let from_file_var = load_from(None, Some(path.clone().into()), None).unwrap();
        let id = |k: &OrganizationKey| k.derive_ledger_tenant_id("i", "s").unwrap();
        assert_eq!(id(&from_file), id(&from_var));
        assert_eq!(id(&from_file), id(&from_file_var));
        // The flag wins over the environment, even over two conflicting variables.
        assert!(load_from(Some(&path), Some("/nope".into()), Some("00".into())).is_ok());
    }

    #[test]
    fn bad_sources_are_refused_with_their_reason() {
        let none = failure(load_from(None, None, None));
        assert_eq!(none.exit, Exit::Invalid);
        assert!(none.hint.contains("--key-file"), "{}", none.hint);
        let both = failure(load_from(None, Some("/a".into()), Some(HEX_KEY.into())));
        assert!(both.message.contains("both"), "{}", both.message);
        let short = failure(load_from(None, None, Some("00".repeat(31).into())));
        assert_eq!(short.code, "GOTRY_TENANT_ID_INVALID");
        assert!(short.message.contains("31"), "{}", short.message);
        let missing = failure(load_from(Some(Path::new("/nonexistent/org.key")), None, None));
        assert_eq!((missing.exit, missing.code.as_str()), (Exit::Invalid, "ENOENT"));
    }
}
