//! Tenant and organization identifiers. The rules are the core's; this file only turns
//! Python objects into the strings and bytes the core checks. The calls are a few hundred
//! nanoseconds, so they keep the interpreter lock: releasing it would cost more than the work.

use gotry_tenant_state::{ids, OrganizationKey};
use pyo3::prelude::*;

use crate::args::{id_text, key_bytes, path_arg};
use crate::errors::CoreError;

#[pyfunction]
pub fn assert_organization_id<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    ids::assert_organization_id(id_text("organization id", value)?).map_err(CoreError)?;
    Ok(value.clone())
}

#[pyfunction]
pub fn assert_ledger_tenant_id<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    ids::assert_ledger_tenant_id(id_text("ledger tenant id", value)?).map_err(CoreError)?;
    Ok(value.clone())
}

#[pyfunction]
pub fn assert_prompt_cache_partition<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    ids::assert_prompt_cache_partition(id_text("prompt cache partition", value)?).map_err(CoreError)?;
    Ok(value.clone())
}

#[pyfunction]
pub fn derive_ledger_tenant_id(
    organization_key: &Bound<'_, PyAny>,
    issuer: &Bound<'_, PyAny>,
    subject: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let key = key_bytes(organization_key)?;
    Ok(
        ids::derive_ledger_tenant_id(&key, id_text("issuer", issuer)?, id_text("subject", subject)?)
            .map_err(CoreError)?,
    )
}

#[pyfunction]
pub fn derive_prompt_cache_partition(
    organization_key: &Bound<'_, PyAny>,
    ledger_tenant_id: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let key = key_bytes(organization_key)?;
    Ok(
        ids::derive_prompt_cache_partition(&key, id_text("ledger tenant id", ledger_tenant_id)?)
            .map_err(CoreError)?,
    )
}

#[pyfunction]
pub fn lease_key_for(
    organization_id: &Bound<'_, PyAny>,
    ledger_tenant_id: &Bound<'_, PyAny>,
) -> PyResult<String> {
    Ok(ids::lease_key_for(
        id_text("organization id", organization_id)?,
        id_text("ledger tenant id", ledger_tenant_id)?,
    )
    .map_err(CoreError)?)
}

/// `state_root` is a `str` or any `os.PathLike`; the result is a `str`, resolved lexically
/// as Node's `path.resolve` does, so every language names the same directory. A root that is
/// not well-formed Unicode is a ValueError, as in Node and C.
#[pyfunction]
pub fn tenant_root_for(
    state_root: &Bound<'_, PyAny>,
    organization_id: &Bound<'_, PyAny>,
    ledger_tenant_id: &Bound<'_, PyAny>,
) -> PyResult<std::ffi::OsString> {
    let state_root = path_arg("state_root", state_root)?;
    let root = ids::tenant_root_for(
        &state_root,
        id_text("organization id", organization_id)?,
        id_text("ledger tenant id", ledger_tenant_id)?,
    )
    .map_err(CoreError)?;
    Ok(root.into_os_string())
}

/// An organization key whose HMAC state is computed once, for a process that derives many
/// ids under one key. The key bytes are not kept, the state is wiped when the object is
/// freed, and neither `repr` nor pickling can show them.
#[pyclass(frozen, module = "gotry_tenant_state", name = "OrganizationKey")]
pub struct PyOrganizationKey(OrganizationKey);

#[pymethods]
impl PyOrganizationKey {
    #[new]
    fn new(key: &Bound<'_, PyAny>) -> PyResult<PyOrganizationKey> {
        Ok(PyOrganizationKey(
            OrganizationKey::new(&key_bytes(key)?).map_err(CoreError)?,
        ))
    }

    fn derive_ledger_tenant_id(
        &self,
        issuer: &Bound<'_, PyAny>,
        subject: &Bound<'_, PyAny>,
    ) -> PyResult<String> {
        Ok(self
            .0
            .derive_ledger_tenant_id(id_text("issuer", issuer)?, id_text("subject", subject)?)
            .map_err(CoreError)?)
    }

    fn derive_prompt_cache_partition(&self, ledger_tenant_id: &Bound<'_, PyAny>) -> PyResult<String> {
        Ok(self
            .0
            .derive_prompt_cache_partition(id_text("ledger tenant id", ledger_tenant_id)?)
            .map_err(CoreError)?)
    }

    fn __repr__(&self) -> &'static str {
        "OrganizationKey(<redacted>)"
    }
}
