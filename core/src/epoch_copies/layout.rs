//! The objects of a tenant's copies in the store: their names (the layout in the module doc),
//! the manifest whose presence makes a copy exist, and the tenure marker that starts a tenure.
//! Epochs and sequence numbers are named by 20 zero-padded digits, and only names of that form
//! are read back as such (`parse_padded`). A manifest with a field this build does not know
//! does not parse, and a restore passes its copy over (`manifest`).

use std::collections::BTreeMap;

use super::*;
use crate::ids::{assert_ledger_tenant_id, assert_organization_id};

pub(super) const MANIFEST: &str = "manifest.json";
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

#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TenureMarker {
    pub(super) format_version: u32,
    pub(super) key: String,
    pub(super) epoch: i64,
    pub(super) replica_id: String,
    pub(super) restored_from: Option<CopyId>,
}

#[derive(Debug, Default)]
pub(super) struct ListedCopy {
    pub(super) manifest: bool,
    pub(super) objects: Vec<ObjectInfo>,
}

#[derive(Debug, Default)]
pub(super) struct Layout {
    pub(super) copies: BTreeMap<CopyId, ListedCopy>,
    pub(super) markers: BTreeMap<i64, String>,
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

pub(super) fn parse_padded(text: &str) -> Option<u64> {
    (text.len() == 20 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}
