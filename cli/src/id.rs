//! `gotry-tenant id ...`: the core's id rules, from the shell.
//!
//! Text output is the bare value, so that `$(gotry-tenant id derive ...)` can be used in a
//! script as it is.

use gotry_tenant_state::ids::claim_from_utf8;
use gotry_tenant_state::{assert_ledger_tenant_id, lease_key_for, tenant_root_for};
use serde_json::json;

use crate::cli::IdCommand;
use crate::failure::{Exit, Failure};
use crate::{key, text_arg, Report};

pub fn run(command: &IdCommand) -> Result<Report, Failure> {
    match command {
        IdCommand::Derive { issuer, subject, key } => {
            // Claims go through the core's strict UTF-8 rule, as a binding's claims do.
            let issuer = claim_from_utf8("issuer", issuer.as_encoded_bytes())?;
            let subject = claim_from_utf8("subject", subject.as_encoded_bytes())?;
            let organization_key = key::load(key.key_file.as_deref())?;
            let tenant = organization_key.derive_ledger_tenant_id(issuer, subject)?;
            Ok(Report::value("ledgerTenantId", tenant))
        }
        IdCommand::CachePartition { tenant, key } => {
            // The id is checked before the key is looked for: a typo is the likelier mistake.
            let tenant = assert_ledger_tenant_id(text_arg("ledger tenant id", tenant)?)?;
            let organization_key = key::load(key.key_file.as_deref())?;
            let partition = organization_key.derive_prompt_cache_partition(tenant)?;
            Ok(Report::value("promptCachePartition", partition))
        }
        IdCommand::LeaseKey { org, tenant } => {
            let key = lease_key_for(
                text_arg("organization id", org)?,
                text_arg("ledger tenant id", tenant)?,
            )?;
            Ok(Report::value("leaseKey", key))
        }
        IdCommand::Root {
            state_root,
            org,
            tenant,
        } => {
            let root = tenant_root_for(
                state_root,
                text_arg("organization id", org)?,
                text_arg("ledger tenant id", tenant)?,
            )?;
            // Shown as it is or not at all: a lossy conversion would print another path.
            let root = root.into_os_string().into_string().map_err(|_| {
                Failure::new(
                    Exit::Invalid,
                    "ERR_INVALID_PATH",
                    "the tenant root is not valid UTF-8 and cannot be printed as it is",
                    "use a state root whose path is UTF-8",
                )
            })?;
            Ok(Report::new(json!({ "tenantRoot": root }), format!("{root}\n")))
        }
    }
}
