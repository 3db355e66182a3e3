//! Property tests: the hand-written validators agree with the specification's regular
//! expressions on arbitrary strings, and a tenant root never leaves its state root.

use std::path::{Component, Path};

use gotry_tenant_state::{
    assert_ledger_tenant_id, assert_organization_id, assert_prompt_cache_partition, tenant_root_for,
};
use proptest::prelude::*;
use regex::Regex;

fn near_misses(valid: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        valid,
        (valid, "[\\n\\r\\t \\x00A-Z_./-]{1,2}").prop_map(|(v, tail)| format!("{v}{tail}")),
        ("[\\n\\r\\t \\x00A-Z_./-]{1,2}", valid).prop_map(|(head, v)| format!("{head}{v}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn organization_ids_match_the_regex(value in near_misses("[a-z0-9][a-z0-9-]{0,70}")) {
        let spec = Regex::new(r"\A[a-z0-9][a-z0-9-]{0,62}\z").unwrap();
        prop_assert_eq!(assert_organization_id(&value).is_ok(), spec.is_match(&value));
    }

    #[test]
    fn ledger_tenant_ids_match_the_regex(value in near_misses("t-[0-9a-fA-F]{30,34}")) {
        let spec = Regex::new(r"\At-[0-9a-f]{32}\z").unwrap();
        prop_assert_eq!(assert_ledger_tenant_id(&value).is_ok(), spec.is_match(&value));
    }

    #[test]
    fn partitions_match_the_regex(value in near_misses("pc?-[0-9a-fA-F]{31,33}")) {
        let spec = Regex::new(r"\Apc-[0-9a-f]{32}\z").unwrap();
        prop_assert_eq!(assert_prompt_cache_partition(&value).is_ok(), spec.is_match(&value));
    }

    #[test]
    fn a_tenant_root_stays_under_its_state_root(
        root in "(/|\\.\\.?/|[a-z]{1,3}/|//){0,8}",
        org in near_misses("[a-z0-9.][a-z0-9./-]{0,8}"),
        tenant in near_misses("t-[0-9a-f.]{32}"),
    ) {
        match tenant_root_for(Path::new(&root), &org, &tenant) {
            Ok(path) => {
                let resolved = tenant_root_for(Path::new(&root), "x", &format!("t-{}", "0".repeat(32)))
                    .unwrap();
                let base = resolved.parent().unwrap().parent().unwrap().parent().unwrap().parent().unwrap();
                prop_assert!(path.starts_with(base), "{:?} is outside {:?}", path, base);
                prop_assert_eq!(path.strip_prefix(base).unwrap().components().count(), 4);
                prop_assert!(path.components().all(|c| !matches!(c, Component::ParentDir | Component::CurDir)));
                prop_assert!(path.is_absolute());
            }
            Err(_) => prop_assert!(assert_organization_id(&org).is_err() || assert_ledger_tenant_id(&tenant).is_err()),
        }
    }
}
