//! The objects of a tenant's copies in the store: their names (the layout in the module doc),
//! the manifest whose presence makes a copy exist, and the tenure marker that starts a tenure.
//! Epochs and sequence numbers are named by 20 zero-padded digits, and only names of that form
//! are read back as such (`parse_padded`). A manifest with a field this build does not know
//! does not parse, and a restore passes its copy over (`manifest`).

use std::collections::BTreeMap;

use super::*;
use crate::ids::{assert_ledger_tenant_id, assert_organization_id};

/// Where builds before format 5 wrote a copy's manifest: `<seq:020>/manifest.json`.
pub(super) const LEGACY_MANIFEST: &str = "manifest.json";
/// A manifest is `<epoch:020>/<seq:020>.json`, beside its copy's folder rather than in it: a
/// copy whose objects all ride inline makes no folder, which on a directory store saves a
/// folder and its flush, a third of what a small copy costs.
const MANIFEST_SUFFIX: &str = ".json";
pub(super) const TENURE: &str = "tenure.json";

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Manifest {
    pub(super) format_version: u32,
    pub(super) key: String,
    pub(super) epoch: i64,
    pub(super) seq: u64,
    pub(super) replica_id: String,
    pub(super) written_at_ms: u64,
    pub(super) files: Vec<ManifestFile>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ManifestFile {
    pub(super) path: String,
    pub(super) size: u64,
    pub(super) sha256: String,
    pub(super) sqlite: bool,
}

/// Formats 2 to 6: each file is a base and the deltas that turn it into the file, objects named
/// relative to the tenant's `epochs/` prefix, so that a copy can reference what earlier copies
/// of its lineage stored. Format 2 has at most one delta (`delta`), formats 3 to 5 a chain
/// (`deltas`, applied in order); [`AnyManifest::parse`] reads both into `deltas`. Format 4
/// stores a base larger than a piece as pieces (`base`, then `base_pieces`). Format 5 carries
/// small objects in the manifest ([`ObjectRef::inline`]).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ManifestV2 {
    pub(super) format_version: u32,
    pub(super) key: String,
    pub(super) epoch: i64,
    pub(super) seq: u64,
    pub(super) replica_id: String,
    pub(super) written_at_ms: u64,
    pub(super) files: Vec<FileV2>,
    /// Folders of the root that held nothing (format 3; a restore makes them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) folders: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileV2 {
    pub(super) path: String,
    pub(super) size: u64,
    /// [`super::delta::digest`] of the whole file.
    pub(super) digest: String,
    pub(super) sqlite: bool,
    /// The base, or its first piece when it is larger than [`super::body::PIECE`].
    pub(super) base: ObjectRef,
    /// The base's further pieces, in order (format 4), each a whole number of blocks but the
    /// last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) base_pieces: Vec<ObjectRef>,
    /// Format 2's one delta; never written, moved into `deltas` when read.
    #[serde(default, skip_serializing)]
    pub(super) delta: Option<ObjectRef>,
    #[serde(default)]
    pub(super) deltas: Vec<ObjectRef>,
}

impl FileV2 {
    /// The objects that make the file, base first.
    pub(super) fn objects(&self) -> impl Iterator<Item = &ObjectRef> {
        self.base_objects().chain(&self.deltas)
    }

    pub(super) fn objects_mut(&mut self) -> impl Iterator<Item = &mut ObjectRef> {
        std::iter::once(&mut self.base)
            .chain(&mut self.base_pieces)
            .chain(&mut self.deltas)
    }

    /// The base's pieces, in order.
    pub(super) fn base_objects(&self) -> impl Iterator<Item = &ObjectRef> {
        std::iter::once(&self.base).chain(&self.base_pieces)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ObjectRef {
    /// `<epoch:020>/<seq:020>/files/<name>`, under the tenant's `epochs/` prefix. An inline
    /// object keeps the name it was given, though nothing is stored under it: the name still
    /// says which copy made it, which the check that a copy only looks back relies on.
    pub(super) object: String,
    pub(super) size: u64,
    pub(super) digest: String,
    /// The object's bytes, in the manifest itself (format 5): a strict copy after a one-row
    /// change is then one create-only object, not a delta and a manifest, each with its own
    /// flushes or PUT. Checked against `digest` like a stored object.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "inline_bytes")]
    pub(super) inline: Option<Vec<u8>>,
}

/// Inline bytes as standard base64 in the manifest's JSON.
mod inline_bytes {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &Option<Vec<u8>>, to: S) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => to.serialize_str(&STANDARD.encode(bytes)),
            None => to.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Option<Vec<u8>>, D::Error> {
        Option::<String>::deserialize(from)?
            .map(|text| STANDARD.decode(text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

impl ObjectRef {
    /// The copy whose folder holds the object, when the name is of the form above.
    pub(super) fn copy(&self) -> Option<CopyId> {
        let mut parts = self.object.split('/');
        let epoch = i64::try_from(parse_padded(parts.next()?)?).ok()?;
        let seq = parse_padded(parts.next()?)?;
        let name = (parts.next()? == "files").then(|| parts.next()).flatten()?;
        let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.');
        (plain && parts.next().is_none()).then_some(CopyId { epoch, seq })
    }
}

/// A manifest of either format, told apart by `format_version`.
#[derive(Debug)]
pub(super) enum AnyManifest {
    V1(Manifest),
    V2(ManifestV2),
}

impl AnyManifest {
    pub(super) fn parse(bytes: &[u8]) -> Option<AnyManifest> {
        #[derive(Deserialize)]
        struct Version {
            format_version: u32,
        }
        match serde_json::from_slice::<Version>(bytes).ok()?.format_version {
            1 => serde_json::from_slice(bytes).ok().map(AnyManifest::V1),
            2 => {
                let mut manifest: ManifestV2 = serde_json::from_slice(bytes).ok()?;
                for file in &mut manifest.files {
                    let inline = file.objects().chain(&file.delta).any(|o| o.inline.is_some());
                    if !file.deltas.is_empty() || !file.base_pieces.is_empty() || inline {
                        return None;
                    }
                    file.deltas.extend(file.delta.take());
                }
                Some(AnyManifest::V2(manifest))
            }
            version @ 3..=6 => serde_json::from_slice::<ManifestV2>(bytes)
                .ok()
                .filter(|m| {
                    m.files.iter().all(|f| {
                        f.delta.is_none()
                            && (version >= 4 || f.base_pieces.is_empty())
                            && (version >= 5 || f.objects().all(|o| o.inline.is_none()))
                    })
                })
                .map(AnyManifest::V2),
            _ => None,
        }
    }

    pub(super) fn key(&self) -> &str {
        match self {
            AnyManifest::V1(m) => &m.key,
            AnyManifest::V2(m) => &m.key,
        }
    }

    pub(super) fn paths(&self) -> Vec<&str> {
        match self {
            AnyManifest::V1(m) => m.files.iter().map(|f| f.path.as_str()).collect(),
            AnyManifest::V2(m) => m.files.iter().map(|f| f.path.as_str()).collect(),
        }
    }

    /// Whether a restore can lay the copy out: its files (see [`layable`]) and its empty
    /// folders, each a plain relative path that neither is a file nor lies under one.
    pub(super) fn layable(&self) -> bool {
        let files = self.paths();
        let folders: &[String] = match self {
            AnyManifest::V1(_) => &[],
            AnyManifest::V2(m) => &m.folders,
        };
        let named: BTreeSet<&str> = files.iter().copied().collect();
        layable(&files)
            && folders.iter().all(|folder| {
                layable(&[folder.as_str()])
                    && std::iter::once(folder.as_str())
                        .chain(folder.match_indices('/').map(|(i, _)| &folder[..i]))
                        .all(|above| !named.contains(above))
            })
    }

    /// Every object the copy needs from the store (its inline ones aside), by full store key,
    /// with its size.
    pub(super) fn objects(&self, key: &str, id: CopyId) -> Result<Vec<(String, u64)>> {
        Ok(match self {
            AnyManifest::V1(m) => {
                let prefix = copy_prefix(key, id)?;
                m.files
                    .iter()
                    .enumerate()
                    .map(|(index, f)| (format!("{prefix}files/{index:06}"), f.size))
                    .collect()
            }
            AnyManifest::V2(m) => {
                let prefix = tenant_prefix(key)?;
                m.files
                    .iter()
                    .flat_map(FileV2::objects)
                    .filter(|o| o.inline.is_none())
                    .map(|o| (format!("{prefix}{}", o.object), o.size))
                    .collect()
            }
        })
    }
}

/// Whether a restore can lay these paths out as files of one folder: each a relative path of
/// plain names the file system can hold (no NUL, no trailing `/`, no name over 255 bytes), none
/// twice, none a folder of another.
pub(super) fn layable(paths: &[&str]) -> bool {
    let plain = paths.iter().all(|path| {
        super::restore::relative_path(path).is_some()
            && !path.ends_with('/')
            && !path.contains("//")
            && !path.contains('\0')
            && path
                .split('/')
                .all(|name| !name.is_empty() && name.len() <= 255 && name != ".")
    });
    if !plain {
        return false;
    }
    let mut sorted: Vec<&str> = paths.to_vec();
    sorted.sort_unstable();
    // Every folder some path implies: a file there could not be laid out.
    let folders: BTreeSet<&str> = paths
        .iter()
        .flat_map(|p| p.match_indices('/').map(move |(i, _)| &p[..i]))
        .collect();
    sorted.windows(2).all(|w| w[0] != w[1]) && sorted.iter().all(|p| !folders.contains(p))
}

#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TenureMarker {
    pub(super) format_version: u32,
    pub(super) key: String,
    pub(super) epoch: i64,
    pub(super) replica_id: String,
    pub(super) restored_from: Option<CopyId>,
    /// The grant this tenure began with ([`TenantLease::tenure_id`], in hex): a lease store
    /// that lost commits may grant the same epoch to the same replica again, and only this
    /// tells that second grant from a retry of the first one's restore. Absent in markers
    /// written before it existed, which therefore match no grant of this build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) tenure_id: Option<String>,
}

#[derive(Debug, Default)]
pub(super) struct ListedCopy {
    /// The key of its manifest, when it has one: the copy exists.
    pub(super) manifest: Option<String>,
    /// Everything the copy's names hold, its manifest included.
    pub(super) objects: Vec<ObjectInfo>,
}

#[derive(Debug, Default)]
pub(super) struct Layout {
    pub(super) copies: BTreeMap<CopyId, ListedCopy>,
    pub(super) markers: BTreeMap<i64, String>,
    /// Manifest names reserved for copies not written yet (see [`is_reserved`]), with their keys.
    pub(super) reserved: Vec<(CopyId, String)>,
}

/// Whether a manifest of `size` bytes is a name reserved for a copy not written yet
/// ([`DurableStore::reserve`]): an empty one. No manifest is empty, so readers pass it over as
/// no copy at all, and only the holder that reserved it writes it.
pub(super) fn is_reserved(size: u64) -> bool {
    size == 0
}

/// `orgs/<org>/tenants/<tenant>/epochs/` of a lease key `<org>/<tenant>`.
pub(super) fn tenant_prefix(key: &str) -> Result<String> {
    let (org, tenant) = key.split_once('/').ok_or_else(|| {
        Error::id_invalid(format!(
            "{key:?} is not a lease key of the form <organization>/<tenant>"
        ))
    })?;
    Ok(format!(
        "orgs/{}/tenants/{}/epochs/",
        assert_organization_id(org)?,
        assert_ledger_tenant_id(tenant)?
    ))
}

pub(super) fn epoch_prefix(key: &str, epoch: i64) -> Result<String> {
    Ok(format!("{}{epoch:020}/", tenant_prefix(key)?))
}

pub(super) fn copy_prefix(key: &str, id: CopyId) -> Result<String> {
    Ok(format!("{}{:020}/", epoch_prefix(key, id.epoch)?, id.seq))
}

/// The key of copy `id`'s manifest, as this build writes it.
pub(super) fn manifest_key(key: &str, id: CopyId) -> Result<String> {
    Ok(format!(
        "{}{:020}{MANIFEST_SUFFIX}",
        epoch_prefix(key, id.epoch)?,
        id.seq
    ))
}

/// What a key below an epoch's prefix is: the tenure marker, a copy's manifest (of either
/// name), or one of a copy's objects, with the copy's sequence number.
pub(super) enum EpochEntry {
    Tenure,
    Manifest(u64),
    Object(u64),
}

impl EpochEntry {
    pub(super) fn parse(rest: &str) -> Option<EpochEntry> {
        if rest == TENURE {
            return Some(EpochEntry::Tenure);
        }
        if let Some(seq) = rest.strip_suffix(MANIFEST_SUFFIX).and_then(parse_padded) {
            return Some(EpochEntry::Manifest(seq));
        }
        let (seq, name) = rest.split_once('/')?;
        let seq = parse_padded(seq)?;
        Some(if name == LEGACY_MANIFEST {
            EpochEntry::Manifest(seq)
        } else {
            EpochEntry::Object(seq)
        })
    }
}

pub(super) fn parse_padded(text: &str) -> Option<u64> {
    (text.len() == 20 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}
