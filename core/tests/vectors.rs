//! The shared id vectors of `tests/vectors/ids.json`, whose expected ids were computed by
//! Python's own hmac, not by this crate. (The store scenarios run in the conformance suite.)

use std::path::Path;

use gotry_tenant_state::ids::claim_from_utf16;
use gotry_tenant_state::{
    assert_ledger_tenant_id, assert_organization_id, assert_prompt_cache_partition, lease_key_for,
    tenant_root_for, Error, OrganizationKey,
};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/ids.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn claim(case: &Value, name: &str) -> Result<String, Error> {
    match case[name].as_str() {
        Some(text) => Ok(text.to_owned()),
        None => {
            let units: Vec<u16> = case[format!("{name}_utf16")]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u16::try_from(u.as_u64().unwrap()).unwrap())
                .collect();
            claim_from_utf16(name, &units)
        }
    }
}

/// The outcome in the vectors' spelling: the value, or the error code.
fn outcome(result: Result<String, Error>) -> Value {
    match result {
        Ok(value) => Value::String(value),
        Err(error) => serde_json::json!({"error": error.code_str()}),
    }
}

#[test]
fn derivations() {
    let all = vectors();
    let cases: Vec<&Value> = all["derive"]
        .as_array()
        .unwrap()
        .iter()
        .chain(all["derive_utf16"].as_array().unwrap())
        .collect();
    assert!(cases.len() > 15);
    for case in cases {
        let derived = OrganizationKey::new(&hex(case["key_hex"].as_str().unwrap())).and_then(|key| {
            let tenant = key.derive_ledger_tenant_id(&claim(case, "issuer")?, &claim(case, "subject")?)?;
            let partition = key.derive_prompt_cache_partition(&tenant)?;
            Ok(serde_json::json!({"ledger_tenant_id": tenant, "prompt_cache_partition": partition}))
        });
        let got = derived.unwrap_or_else(|e| serde_json::json!({"error": e.code_str()}));
        assert_eq!(got, case["expect"], "{}", case["note"]);
    }
}

#[test]
fn validators() {
    let all = vectors();
    type Validator = fn(&str) -> Result<&str, Error>;
    let checks: [(&str, Validator); 3] = [
        ("organization_ids", assert_organization_id),
        ("ledger_tenant_ids", assert_ledger_tenant_id),
        ("prompt_cache_partitions", assert_prompt_cache_partition),
    ];
    for (name, check) in checks {
        for case in all[name].as_array().unwrap() {
            let value = case["value"].as_str().unwrap();
            assert_eq!(
                check(value).is_ok(),
                case["valid"].as_bool().unwrap(),
                "{name}: {value:?}"
            );
        }
    }
}

#[test]
fn lease_keys_and_roots() {
    let all = vectors();
    for case in all["lease_keys"].as_array().unwrap() {
        let got = lease_key_for(case["org"].as_str().unwrap(), case["tenant"].as_str().unwrap());
        assert_eq!(outcome(got), case["expect"]);
    }
    for case in all["tenant_roots"].as_array().unwrap() {
        let got = tenant_root_for(
            Path::new(case["state_root"].as_str().unwrap()),
            case["org"].as_str().unwrap(),
            case["tenant"].as_str().unwrap(),
        )
        .map(|p| p.to_str().unwrap().to_owned());
        assert_eq!(outcome(got), case["expect"]);
    }
}
