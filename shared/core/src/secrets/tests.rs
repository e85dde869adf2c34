use indexmap::IndexMap;
use serde_json::{Value, json};

use super::*;
use crate::intrinsics::{BoundParameters, bind_parameters};
use crate::template::Template;

fn parameters(secret: &str) -> BoundParameters {
    let t = Template::from_value(&json!({
        "Parameters": {
            "Password": {"Type": "String", "NoEcho": true},
            "Env": {"Type": "String", "Default": "dev"}
        },
        "Resources": {}
    }))
    .unwrap();
    let given: IndexMap<String, String> = [("Password".to_string(), secret.to_string())].into();
    bind_parameters(&t, &given).unwrap()
}

fn sensitive(res: &str, attr: &str) -> bool {
    res == "Creds" && attr == "Token"
}

#[test]
fn hmac_matches_rfc_4231_case_2() {
    let mac = hmac(b"Jefe", b"what do ya want for nothing?");
    assert_eq!(
        hex(&mac),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

#[test]
fn tokens_are_stable_keyed_and_recognised() {
    let key = DigestKey::new([7; 32]).for_stack("app");
    let other = DigestKey::new([7; 32]).for_stack("other");
    let t = key.token("hunter2hunter2");
    assert!(is_mask(&t), "{t}");
    assert_eq!(t, key.token("hunter2hunter2"));
    assert_ne!(t, key.token("hunter3hunter3"));
    assert_ne!(t, other.token("hunter2hunter2"));
    assert!(!t.contains("hunter"));
    assert!(is_mask(MASK));
    assert!(!is_mask("****x"));
    assert_eq!(DigestKey::from_hex(&key.to_hex()), Some(key.clone()));
    assert!(!format!("{key:?}").contains(&key.to_hex()));
}

#[test]
fn values_derived_from_a_noecho_parameter_are_masked_whole() {
    let p = parameters("hunter2hunter2");
    let key = DigestKey::new([1; 32]);
    let m = Masking::new(&p, Some(&key), &sensitive);
    let template = json!({
        "Direct": {"Ref": "Password"},
        "Encoded": {"Fn::Base64": {"Ref": "Password"}},
        "Sub": {"Fn::Sub": "user:${Password}@host"},
        "SubOwn": {"Fn::Sub": ["${X}", {"X": {"Ref": "Password"}}]},
        "Piece": {"Fn::Select": [1, {"Fn::Split": ["2", {"Ref": "Password"}]}]},
        "Token": {"Fn::GetAtt": ["Creds", "Token"]},
        "Plain": {"Fn::Sub": "${Env}-${!Password}"},
        "Nested": {"Inner": [{"Fn::Join": ["-", ["a", {"Ref": "Password"}]]}, "keep"]},
        "Literal": "static"
    });
    let resolved = json!({
        "Direct": "hunter2hunter2",
        "Encoded": "aHVudGVyMmh1bnRlcjI=",
        "Sub": "user:hunter2hunter2@host",
        "SubOwn": "hunter2hunter2",
        "Piece": "hunter",
        "Token": "tok-123456",
        "Plain": "dev-${Password}",
        "Nested": {"Inner": ["a-hunter2hunter2", "keep"]},
        "Literal": "static"
    });
    let mut pointers = m.tainted_pointers(&template, &resolved);
    pointers.sort();
    assert_eq!(
        pointers,
        [
            "/Direct",
            "/Encoded",
            "/Nested/Inner/0",
            "/Piece",
            "/Sub",
            "/SubOwn",
            "/Token"
        ]
    );
    let masked = m.mask(&template, &resolved);
    for p in &pointers {
        let v = masked.pointer(p).and_then(Value::as_str).unwrap();
        assert!(is_mask(v), "{p}: {v}");
    }
    assert_eq!(masked["Plain"], json!("dev-${Password}"));
    assert_eq!(masked["Nested"]["Inner"][1], json!("keep"));
    assert_eq!(masked["Literal"], json!("static"));
    let text = masked.to_string();
    for leak in ["hunter", "aHVudGVy", "tok-123456"] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    // Rotating the value changes the digest, so a plan sees an update.
    let p2 = parameters("correcthorse");
    let m2 = Masking::new(&p2, Some(&key), &sensitive);
    let resolved2 = json!({"Direct": "correcthorse"});
    let t2 = json!({"Direct": {"Ref": "Password"}});
    assert_ne!(
        m.mask(&t2, &json!({"Direct": "hunter2hunter2"})),
        m2.mask(&t2, &resolved2)
    );
}

#[test]
fn a_list_shortened_by_novalue_is_masked_whole_when_tainted() {
    let p = parameters("hunter2hunter2");
    let m = Masking::new(&p, None, &no_sensitive_attributes);
    let template = json!({"L": ["a", {"Ref": "AWS::NoValue"}, {"Ref": "Password"}]});
    let resolved = json!({"L": ["a", "hunter2hunter2"]});
    assert_eq!(m.tainted_pointers(&template, &resolved), ["/L"]);
    assert_eq!(m.mask(&template, &resolved), json!({"L": ["****", "****"]}));
}

#[test]
fn attributes_holding_a_secret_in_any_form_are_masked_whole() {
    let p = parameters("hunter2hunter2");
    let m = Masking::new(&p, None, &no_sensitive_attributes);
    let attrs = json!({
        "Value": "hunter2hunter2",
        "Json": "{\"p\":\"say \\\"hi\\\" now\"}",
        "B64": "x-aHVudGVyMmh1bnRlcjI=",
        "Arn": "arn:aws:ssm:us-east-1:1:parameter/app",
        "Short": "ab"
    });
    let needles = vec![
        "hunter2hunter2".to_string(),
        "say \"hi\" now".to_string(),
        "a".to_string(),
    ];
    let masked = m.mask_containing(&attrs, &needles);
    assert_eq!(masked["Value"], json!("****"));
    assert_eq!(masked["Json"], json!("****"));
    assert_eq!(masked["B64"], json!("****"));
    assert_eq!(masked["Arn"], attrs["Arn"]);
    assert_eq!(masked["Short"], json!("ab"));
}
