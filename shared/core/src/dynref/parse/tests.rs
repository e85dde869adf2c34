use proptest::prelude::*;

use super::*;
use crate::dynref::testing::{reference, sm, ssm, ssm_secure};

/// Parses `text`, checks the expected reference, and checks that the canonical text is
/// `canonical` and parses back to the same reference.
fn check(text: &str, expected: DynamicReference, canonical: &str) {
    let parsed = DynamicReference::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(parsed, expected, "{text}");
    assert_eq!(parsed.to_string(), canonical, "{text}");
    assert_eq!(DynamicReference::parse(canonical).unwrap(), parsed);
    assert_eq!(canonical.parse::<DynamicReference>().unwrap(), parsed);
    let found = find_all(text).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].start, found[0].end), (0, text.len()));
    assert_eq!(found[0].text, text);
    assert_eq!(found[0].reference, expected);
}

#[test]
fn ssm_forms() {
    let t = "{{resolve:ssm:MyParam}}";
    check(t, ssm("MyParam", None), t);
    let t = "{{resolve:ssm:MyParam:3}}";
    check(t, ssm("MyParam", Some("3")), t);
    let t = "{{resolve:ssm:/app/prod/db.host_name-1}}";
    check(t, ssm("/app/prod/db.host_name-1", None), t);
    let t =
        "{{resolve:ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64:12}}";
    check(
        t,
        ssm(
            "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64",
            Some("12"),
        ),
        t,
    );
    let t = "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012:parameter/app/db.host}}";
    check(
        t,
        ssm(
            "arn:aws:ssm:us-east-1:123456789012:parameter/app/db.host",
            None,
        ),
        t,
    );
    let t = "{{resolve:ssm:arn:aws-cn:ssm:cn-north-1:123456789012:parameter/MyParam:7}}";
    check(
        t,
        ssm(
            "arn:aws-cn:ssm:cn-north-1:123456789012:parameter/MyParam",
            Some("7"),
        ),
        t,
    );
    // A parameter may be called "arn".
    let t = "{{resolve:ssm:arn:2}}";
    check(t, ssm("arn", Some("2")), t);
}

#[test]
fn ssm_secure_forms() {
    let t = "{{resolve:ssm-secure:IAMUserPassword}}";
    check(t, ssm_secure("IAMUserPassword", None), t);
    let t = "{{resolve:ssm-secure:/prod/db/password:10}}";
    check(t, ssm_secure("/prod/db/password", Some("10")), t);
    let t = "{{resolve:ssm-secure:arn:aws:ssm:eu-west-1:123456789012:parameter/prod/pw:2}}";
    check(
        t,
        ssm_secure(
            "arn:aws:ssm:eu-west-1:123456789012:parameter/prod/pw",
            Some("2"),
        ),
        t,
    );
}

#[test]
fn secretsmanager_forms() {
    let t = "{{resolve:secretsmanager:MySecret}}";
    check(t, sm("MySecret", None, None, None), t);
    check(
        "{{resolve:secretsmanager:MySecret:SecretString}}",
        sm("MySecret", None, None, None),
        "{{resolve:secretsmanager:MySecret}}",
    );
    let t = "{{resolve:secretsmanager:MySecret:SecretString:password}}";
    check(t, sm("MySecret", Some("password"), None, None), t);
    check(
        "{{resolve:secretsmanager:MySecret:SecretString:password::}}",
        sm("MySecret", Some("password"), None, None),
        "{{resolve:secretsmanager:MySecret:SecretString:password}}",
    );
    let t = "{{resolve:secretsmanager:MySecret:SecretString:password:AWSPREVIOUS}}";
    check(
        t,
        sm("MySecret", Some("password"), Some("AWSPREVIOUS"), None),
        t,
    );
    let t = "{{resolve:secretsmanager:MySecret:SecretString::AWSPENDING}}";
    check(t, sm("MySecret", None, Some("AWSPENDING"), None), t);
    let vid = "EXAMPLE1-90ab-cdef-fedc-ba987EXAMPLE";
    check(
        &format!("{{{{resolve:secretsmanager:MySecret::::{vid}}}}}"),
        sm("MySecret", None, None, Some(vid)),
        &format!("{{{{resolve:secretsmanager:MySecret:SecretString:::{vid}}}}}"),
    );
    let t = format!("{{{{resolve:secretsmanager:MySecret:SecretString:username::{vid}}}}}");
    check(&t, sm("MySecret", Some("username"), None, Some(vid)), &t);
    check(
        "{{resolve:secretsmanager:MySecret:::}}",
        sm("MySecret", None, None, None),
        "{{resolve:secretsmanager:MySecret}}",
    );
    let t = "{{resolve:secretsmanager:prod/app+db=1.x@y_z-w}}";
    check(t, sm("prod/app+db=1.x@y_z-w", None, None, None), t);
    // A secret may be called "arn".
    let t = "{{resolve:secretsmanager:arn:SecretString:k}}";
    check(t, sm("arn", Some("k"), None, None), t);
}

#[test]
fn secretsmanager_arn_ids_with_colons() {
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:MySecret-a1b2c3";
    let t = format!("{{{{resolve:secretsmanager:{arn}}}}}");
    check(&t, sm(arn, None, None, None), &t);
    let t = format!("{{{{resolve:secretsmanager:{arn}:SecretString:password}}}}");
    check(&t, sm(arn, Some("password"), None, None), &t);
    check(
        &format!("{{{{resolve:secretsmanager:{arn}:SecretString:password:AWSCURRENT:}}}}"),
        sm(arn, Some("password"), Some("AWSCURRENT"), None),
        &format!("{{{{resolve:secretsmanager:{arn}:SecretString:password:AWSCURRENT}}}}"),
    );
    check(
        &format!("{{{{resolve:secretsmanager:{arn}::::v-1}}}}"),
        sm(arn, None, None, Some("v-1")),
        &format!("{{{{resolve:secretsmanager:{arn}:SecretString:::v-1}}}}"),
    );
    let gov = "arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:a/b-Xy12Zw";
    let t = format!("{{{{resolve:secretsmanager:{gov}:SecretString:k}}}}");
    check(&t, sm(gov, Some("k"), None, None), &t);
}

#[test]
fn is_secret_and_service() {
    assert!(!ssm("a", None).is_secret());
    assert!(ssm_secure("a", None).is_secret());
    assert!(sm("a", None, None, None).is_secret());
    assert_eq!(ssm("a", None).service(), "ssm");
    assert_eq!(ssm_secure("a", None).service(), "ssm-secure");
    assert_eq!(sm("a", None, None, None).service(), "secretsmanager");
}

#[test]
fn several_references_in_one_string() {
    let s = "postgres://{{resolve:ssm:/db/user}}:{{resolve:secretsmanager:Db:SecretString:password}}@{{resolve:ssm:/db/host:2}}/app";
    let found = find_all(s).unwrap();
    assert_eq!(
        found
            .iter()
            .map(|o| o.reference.clone())
            .collect::<Vec<_>>(),
        vec![
            ssm("/db/user", None),
            sm("Db", Some("password"), None, None),
            ssm("/db/host", Some("2")),
        ]
    );
    for o in &found {
        assert_eq!(&s[o.start..o.end], o.text);
    }
    assert_eq!(found[0].start, "postgres://".len());
    // Adjacent references and stray braces around them.
    let s = "{{{{resolve:ssm:a}}{{resolve:ssm:b}}}}";
    let found = find_all(s).unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].text, "{{resolve:ssm:a}}");
    assert_eq!(found[0].start, 2);
    assert_eq!(found[1].text, "{{resolve:ssm:b}}");
}

#[test]
fn no_references() {
    for s in [
        "",
        "plain",
        "{{resolve}}",
        "{{ resolve:ssm:a }}",
        "{resolve:ssm:a}",
        "}}",
    ] {
        assert_eq!(find_all(s).unwrap(), vec![], "{s}");
    }
    assert!(!contains_dynamic_reference("{{resolve}}"));
    assert!(contains_dynamic_reference("x{{resolve:ssm:a}}y"));
    assert!(contains_dynamic_reference("x{{resolve:bogus"));
}

#[test]
fn unknown_service() {
    let err = find_all("a {{resolve:s3:bucket/key}} b").unwrap_err();
    assert_eq!(
        err,
        DynRefError::UnknownService {
            service: "s3".into(),
            text: "{{resolve:s3:bucket/key}}".into()
        }
    );
    assert!(err.to_string().contains("{{resolve:s3:bucket/key}}"));
    // Service names are case-sensitive.
    assert!(matches!(
        find_all("{{resolve:SSM:a}}"),
        Err(DynRefError::UnknownService { .. })
    ));
    assert!(matches!(
        find_all("{{resolve:secretsmanagerx}}"),
        Err(DynRefError::UnknownService { .. })
    ));
}

#[test]
fn empty_names() {
    for t in [
        "{{resolve:ssm}}",
        "{{resolve:ssm:}}",
        "{{resolve:ssm::3}}",
        "{{resolve:ssm-secure:}}",
        "{{resolve:secretsmanager}}",
        "{{resolve:secretsmanager:}}",
        "{{resolve:secretsmanager::SecretString:k}}",
    ] {
        let err = find_all(t).unwrap_err();
        assert!(matches!(err, DynRefError::EmptyName { .. }), "{t}: {err:?}");
        assert!(err.to_string().contains(t), "{err}");
    }
}

#[test]
fn malformed() {
    for t in [
        "{{resolve:}}",
        "{{resolve::a}}",
        "{{resolve:ssm:a:b}}",
        "{{resolve:ssm:a:}}",
        "{{resolve:ssm:a:1:2}}",
        "{{resolve:ssm:a:-1}}",
        "{{resolve:ssm:my param}}",
        "{{resolve:ssm:a$b}}",
        "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012}}",
        "{{resolve:ssm:arn:aws:s3:us-east-1:123456789012:parameter/x}}",
        "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012:parameter/x:1:2}}",
        "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012:parameter/}}",
        "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012:parameterXY}}",
        "{{resolve:ssm:arn:aws:ssm:us-east-1:123456789012:param/x}}",
        "{{resolve:ssm:arn:aws:ssm::123456789012:parameter/x}}",
        "{{resolve:ssm:a\\}}",
        "{{resolve:secretsmanager:MySecret:SecretBinary}}",
        "{{resolve:secretsmanager:MySecret:SecretString:k:s:i:extra}}",
        "{{resolve:secretsmanager:MySecret:SecretString:k:AWSCURRENT:v1}}",
        "{{resolve:secretsmanager:My Secret}}",
        "{{resolve:secretsmanager:arn:aws:secretsmanager:us-east-1:123456789012:secret}}",
        "{{resolve:secretsmanager:arn:aws:secretsmanager:us-east-1:123456789012:secret:}}",
        "{{resolve:secretsmanager:arn:aws:ssm:us-east-1:123456789012:secret:x}}",
        "{{resolve:secretsmanager:arn:aws:secretsmanager:us-east-1:123456789012:parameter:x}}",
        "{{resolve:secretsmanager:MySecret:SecretString:k\\}}",
        "{{resolve:ssm:{{resolve:ssm:a}}}}",
    ] {
        let err = find_all(t).unwrap_err();
        assert!(
            matches!(
                err,
                DynRefError::Malformed { .. } | DynRefError::EmptyName { .. }
            ),
            "{t}: {err:?}"
        );
        assert!(err.to_string().contains("{{resolve:"), "{err}");
    }
}

#[test]
fn unterminated() {
    let err = find_all("x {{resolve:ssm:abc").unwrap_err();
    assert_eq!(
        err,
        DynRefError::Unterminated {
            text: "{{resolve:ssm:abc".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "unterminated dynamic reference {{resolve:ssm:abc: no closing \"}}\""
    );
    assert!(matches!(
        find_all("{{resolve:ssm:a}} {{resolve:ssm:b}"),
        Err(DynRefError::Unterminated { .. })
    ));
}

#[test]
fn parse_requires_exactly_one_reference() {
    assert!(DynamicReference::parse("x{{resolve:ssm:a}}").is_err());
    assert!(DynamicReference::parse("{{resolve:ssm:a}}x").is_err());
    assert!(DynamicReference::parse("{{resolve:ssm:a}}{{resolve:ssm:b}}").is_err());
    assert!(DynamicReference::parse("").is_err());
}

#[test]
fn serde_round_trip() {
    let r = sm(
        "arn:aws:secretsmanager:us-east-1:1:secret:x",
        Some("k"),
        None,
        None,
    );
    let j = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<DynamicReference>(&j).unwrap(), r);
}

proptest! {
    #[test]
    fn display_round_trips(r in reference()) {
        let text = r.to_string();
        prop_assert_eq!(DynamicReference::parse(&text), Ok(r.clone()));
        let found = find_all(&format!("a{text}b")).unwrap();
        prop_assert_eq!(found.len(), 1);
        prop_assert_eq!(&found[0].reference, &r);
        prop_assert_eq!(found[0].start, 1);
    }

    #[test]
    fn find_all_never_panics(s in "(\\{\\{resolve:|ssm|secretsmanager|ssm-secure|:|\\}\\}|[a-z/é\\\\ ]){0,12}") {
        if let Ok(found) = find_all(&s) {
            for o in found {
                prop_assert_eq!(&s[o.start..o.end], o.text.as_str());
                prop_assert_eq!(DynamicReference::parse(&o.reference.to_string()), Ok(o.reference.clone()));
            }
        }
    }
}
