//! Tenant and organization ids for JavaScript. The rules are the core's; this only turns JS
//! values into what the core takes, in the order the reference checks them.

use gotry_tenant_state::errors::{Error, Result};
use gotry_tenant_state::ids;
use gotry_tenant_state::OrganizationKey;
use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;

use crate::args;
use crate::errors::OrThrow;

fn key_of(key: &Unknown<'_>) -> Result<OrganizationKey> {
    OrganizationKey::new(&args::key_bytes(key)?)
}

/// An organization id and a ledger tenant id to validate, checked in that order.
pub fn tenant_ids(organization_id: &Unknown<'_>, ledger_tenant_id: &Unknown<'_>) -> Result<(String, String)> {
    let organization = args::id_text("organization id", organization_id)?;
    let tenant = args::id_text("ledger tenant id", ledger_tenant_id)?;
    Ok((organization, tenant))
}

/// `t-` + the first 128 bits of HMAC-SHA256(key, issuer 0x00 subject).
#[napi]
pub fn derive_ledger_tenant_id(
    env: Env,
    organization_key: Unknown<'_>,
    issuer: Unknown<'_>,
    subject: Unknown<'_>,
) -> napi::Result<String> {
    let derive = || {
        let key = key_of(&organization_key)?;
        let issuer = args::claim("issuer", &issuer)?;
        let subject = args::claim("subject", &subject)?;
        key.derive_ledger_tenant_id(&issuer, &subject)
    };
    derive().or_throw(&env)
}

/// `pc-` + the first 128 bits of HMAC-SHA256(key, context 0x00 ledger tenant id).
#[napi]
pub fn derive_prompt_cache_partition(
    env: Env,
    organization_key: Unknown<'_>,
    ledger_tenant_id: Unknown<'_>,
) -> napi::Result<String> {
    let derive = || {
        let key = key_of(&organization_key)?;
        let tenant = args::id_text("ledger tenant id", &ledger_tenant_id)?;
        key.derive_prompt_cache_partition(&tenant)
    };
    derive().or_throw(&env)
}

/// Returns the value when it is a valid organization id.
#[napi]
pub fn assert_organization_id(env: Env, value: Unknown<'_>) -> napi::Result<String> {
    validate(&env, "organization id", &value, ids::assert_organization_id)
}

/// Returns the value when it is a valid ledger tenant id.
#[napi]
pub fn assert_ledger_tenant_id(env: Env, value: Unknown<'_>) -> napi::Result<String> {
    validate(&env, "ledger tenant id", &value, ids::assert_ledger_tenant_id)
}

/// Returns the value when it is a valid prompt cache partition.
#[napi]
pub fn assert_prompt_cache_partition(env: Env, value: Unknown<'_>) -> napi::Result<String> {
    validate(
        &env,
        "prompt cache partition",
        &value,
        ids::assert_prompt_cache_partition,
    )
}

fn validate(
    env: &Env,
    name: &str,
    value: &Unknown<'_>,
    rule: fn(&str) -> Result<&str>,
) -> napi::Result<String> {
    let checked = || {
        let text = args::id_text(name, value)?;
        rule(&text)?;
        Ok(text)
    };
    checked().or_throw(env)
}

/// `<organization>/<ledger tenant>`.
#[napi]
pub fn lease_key_for(
    env: Env,
    organization_id: Unknown<'_>,
    ledger_tenant_id: Unknown<'_>,
) -> napi::Result<String> {
    tenant_ids(&organization_id, &ledger_tenant_id)
        .and_then(|(organization, tenant)| ids::lease_key_for(&organization, &tenant))
        .or_throw(&env)
}

/// `<resolved state root>/orgs/<organization>/tenants/<ledger tenant>`, resolved as
/// `path.resolve` does.
#[napi]
pub fn tenant_root_for(
    env: Env,
    state_root: Unknown<'_>,
    organization_id: Unknown<'_>,
    ledger_tenant_id: Unknown<'_>,
) -> napi::Result<String> {
    let root = || {
        let state_root = args::string("stateRoot", &state_root)?;
        let (organization, tenant) = tenant_ids(&organization_id, &ledger_tenant_id)?;
        let root = ids::tenant_root_for(state_root.as_ref(), &organization, &tenant)?;
        root.into_os_string()
            .into_string()
            .map_err(|_| Error::InvalidArgument {
                message: "the tenant root is not valid Unicode".to_owned(),
            })
    };
    root().or_throw(&env)
}
