//! Unit tests: the baseline, the comparison and accepting.

use serde_json::{Map, Value, json};

use super::*;

mod dependence;

fn map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn observe(t: Value, a: Value) -> Observed {
    observed_baseline(&map(t), &map(a))
}

fn observed_rules() -> CompareRules {
    CompareRules {
        baseline_is_observed: true,
        ..CompareRules::default()
    }
}

fn diff_paths(c: &Comparison) -> Vec<&str> {
    c.differences().iter().map(|d| d.path.as_str()).collect()
}

const SECRET: &str = "hunter2-s3cr3t";
const REF: &str = "{{resolve:secretsmanager:db:SecretString:password}}";
const NOECHO: &str = "****#0123456789abcdef";

// ---- observed_baseline ----

#[test]
fn a_whole_reference_is_stored_as_its_text() {
    let o = observe(
        json!({"Password": REF, "Name": "db"}),
        json!({"Password": SECRET, "Name": "db", "Port": 5432}),
    );
    assert_eq!(
        o.baseline,
        map(json!({"Password": REF, "Name": "db", "Port": 5432}))
    );
    assert!(o.masked.is_empty());
}

#[test]
fn a_whole_reference_takes_any_value_at_its_position() {
    let o = observe(
        json!({"Port": "{{resolve:ssm:port}}"}),
        json!({"Port": 5432}),
    );
    assert_eq!(o.baseline, map(json!({"Port": "{{resolve:ssm:port}}"})));
    let o = observe(
        json!({"Cfg": REF}),
        json!({"Cfg": {"user": "a", "pass": SECRET}}),
    );
    assert_eq!(o.baseline, map(json!({"Cfg": REF})));
    // Compared with the secret's value: its JSON text is the document AWS returned.
    let mut rules = observed_rules();
    let doc = json!({"user": "a", "pass": SECRET});
    rules.resolved.insert(REF, doc.to_string());
    let aws = map(json!({ "Cfg": doc }));
    assert_eq!(
        compare(&o.baseline, &aws, &rules).classification,
        Classification::InSync
    );
    let changed = map(json!({"Cfg": {"user": "b", "pass": SECRET}}));
    assert_eq!(
        diff_paths(&compare(&o.baseline, &changed, &rules)),
        ["/Cfg"]
    );
}

#[test]
fn an_embedded_reference_is_stored_when_the_text_around_it_matches() {
    let t = format!("postgres://app:{REF}@db:5432/app");
    let o = observe(
        json!({"Env": {"Variables": {"URL": t}}}),
        json!({"Env": {"Variables": {"URL": format!("postgres://app:{SECRET}@db:5432/app")}}}),
    );
    assert_eq!(o.baseline["Env"]["Variables"]["URL"], json!(t));
    assert!(o.masked.is_empty());
}

#[test]
fn an_embedded_reference_that_only_partly_matches_is_masked() {
    let t = format!("postgres://app:{REF}@db:5432/app");
    let o = observe(
        json!({"Env": {"Variables": {"URL": t, "Plain": "x"}}}),
        json!({"Env": {"Variables": {"URL": format!("mysql://app:{SECRET}@db/app"), "Plain": "y"}}}),
    );
    assert_eq!(o.baseline["Env"]["Variables"]["URL"], json!(MASKED));
    assert_eq!(o.baseline["Env"]["Variables"]["Plain"], json!("y"));
    assert_eq!(o.masked, ["/Env/Variables/URL"]);
    let o = observe(json!({"U": format!("a{REF}b")}), json!({"U": 7}));
    assert_eq!(o.masked, ["/U"]);
}

#[test]
fn a_noecho_mask_becomes_masked() {
    let o = observe(
        json!({"MasterUserPassword": NOECHO, "Conn": "user:****@host"}),
        json!({"MasterUserPassword": SECRET, "Conn": format!("user:{SECRET}@host")}),
    );
    assert_eq!(
        o.baseline,
        map(json!({"MasterUserPassword": MASKED, "Conn": MASKED}))
    );
    assert_eq!(o.masked, ["/MasterUserPassword", "/Conn"]);
}

#[test]
fn keys_outside_the_template_are_recorded_as_returned() {
    let o = observe(
        json!({"A": {"Secret": REF}}),
        json!({"A": {"Secret": SECRET, "Default": 1}, "B": "aws default"}),
    );
    assert_eq!(
        o.baseline,
        map(json!({"A": {"Secret": REF, "Default": 1}, "B": "aws default"}))
    );
}

#[test]
fn a_secret_aws_does_not_return_records_nothing() {
    let o = observe(
        json!({"MasterUserPassword": REF, "Engine": "postgres"}),
        json!({"Engine": "postgres"}),
    );
    assert_eq!(o.baseline, map(json!({"Engine": "postgres"})));
    assert!(o.masked.is_empty());
}

#[test]
fn a_list_of_other_length_holding_a_secret_is_masked_whole() {
    let o = observe(
        json!({"Args": ["--user", "app", "--password", REF]}),
        json!({"Args": ["--user", "app", "--password", SECRET, "--extra"]}),
    );
    assert_eq!(o.baseline["Args"], json!(MASKED));
    assert_eq!(o.masked, ["/Args"]);
}

#[test]
fn a_reordered_list_holding_a_secret_is_masked_whole() {
    let o = observe(
        json!({"Vars": [{"Name": "A", "Value": REF}, {"Name": "B", "Value": "plain"}]}),
        json!({"Vars": [{"Name": "B", "Value": "plain"}, {"Name": "A", "Value": SECRET}]}),
    );
    assert_eq!(o.baseline["Vars"], json!(MASKED));
    assert_eq!(o.masked, ["/Vars"]);
}

#[test]
fn a_lined_up_list_keeps_its_items() {
    let o = observe(
        json!({"Vars": [{"Name": "A", "Value": REF}, {"Name": "B", "Value": "5"}]}),
        json!({"Vars": [{"Name": "A", "Value": SECRET, "Type": "SECURE"}, {"Name": "B", "Value": 5}]}),
    );
    assert_eq!(
        o.baseline["Vars"],
        json!([{"Name": "A", "Value": REF, "Type": "SECURE"}, {"Name": "B", "Value": 5}])
    );
    assert!(o.masked.is_empty());
}

#[test]
fn a_value_of_another_type_than_the_template_is_masked() {
    let o = observe(json!({"Cfg": {"Pass": REF}}), json!({"Cfg": ["x", SECRET]}));
    assert_eq!(o.baseline["Cfg"], json!(MASKED));
    assert_eq!(o.masked, ["/Cfg"]);
}

#[test]
fn a_document_as_text_is_matched_as_a_document() {
    let t =
        json!({"Doc": {"Statement": [{"Sid": "s", "Condition": {"StringEquals": {"k": REF}}}]}});
    let text = json!({"Statement": [{"Sid": "s", "Condition": {"StringEquals": {"k": SECRET}}}]})
        .to_string();
    let o = observe(t.clone(), json!({"Doc": text}));
    assert_eq!(o.baseline["Doc"], t["Doc"]);
    let tt = json!({"Doc": t["Doc"].to_string()});
    let o = observe(tt, json!({"Doc": text}));
    assert_eq!(o.baseline["Doc"], t["Doc"]);
    assert!(!serde_json::to_string(&o.baseline).unwrap().contains(SECRET));
}

#[test]
fn masked_pointers_escape_keys() {
    let o = observe(
        json!({"a/b": {"c~d": NOECHO}}),
        json!({"a/b": {"c~d": SECRET}}),
    );
    assert_eq!(o.masked, ["/a~1b/c~0d"]);
    assert_eq!(masked_positions(&o.baseline), o.masked);
}

// ---- compare ----

#[test]
fn equal_values_are_in_sync() {
    let b = map(json!({"A": 1, "B": ["x", {"C": true}]}));
    let c = compare(&b, &b, &observed_rules());
    assert_eq!(c.classification, Classification::InSync);
    assert_eq!(c.status(), "in-sync");
    assert!(c.paths().is_empty());
}

#[test]
fn a_changed_value_is_drift_with_its_path() {
    let b = map(json!({"A": {"B": [1, 2]}, "C": "x"}));
    let a = map(json!({"A": {"B": [1, 3]}, "C": "x"}));
    let c = compare(&b, &a, &observed_rules());
    assert_eq!(c.status(), "drifted");
    assert_eq!(
        c.differences(),
        [Difference {
            path: "/A/B/1".into(),
            recorded: Some(json!(2)),
            aws: Some(json!(3)),
            masked: false,
        }]
    );
    assert_eq!(c.paths(), ["/A/B/1"]);
}

#[test]
fn keys_that_appear_or_disappear_are_drift_against_an_observed_baseline() {
    let b = map(json!({"A": 1, "Gone": 2}));
    let a = map(json!({"A": 1, "New": 3}));
    let c = compare(&b, &a, &observed_rules());
    assert_eq!(diff_paths(&c), ["/Gone", "/New"]);
    assert_eq!(c.differences()[0].aws, None);
    assert_eq!(c.differences()[1].recorded, None);
}

#[test]
fn aws_defaults_are_not_drift_against_template_properties() {
    let b = map(json!({"A": 1, "N": {"X": 1}, "Null": null}));
    let a = map(json!({"A": 1, "Default": 30, "N": {"X": 1, "Y": 2}}));
    let c = compare(&b, &a, &CompareRules::default());
    assert_eq!(c.classification, Classification::InSync);
    // A template key AWS does not return is still drift.
    let c = compare(&map(json!({"A": 1, "B": 2})), &a, &CompareRules::default());
    assert_eq!(diff_paths(&c), ["/B"]);
}

#[test]
fn reordered_tags_and_aws_tags_are_not_drift() {
    let b = map(json!({"Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]}));
    let a = map(json!({"Tags": [
        {"Key": "aws:cloudformation:stack-name", "Value": "s"},
        {"Key": "b", "Value": "2"}, {"Key": "a", "Value": "1"}]}));
    assert_eq!(
        compare(&b, &a, &observed_rules()).classification,
        Classification::InSync
    );
    let as_map = map(json!({"Tags": {"b": "2", "a": "1", "aws:x": "y"}}));
    assert_eq!(
        compare(&b, &as_map, &observed_rules()).classification,
        Classification::InSync
    );
}

#[test]
fn a_changed_tag_is_drift_of_the_tags() {
    let b = map(json!({"Tags": [{"Key": "a", "Value": "1"}]}));
    let a = map(json!({"Tags": [{"Key": "a", "Value": "2"}, {"Key": "aws:x", "Value": "y"}]}));
    let c = compare(&b, &a, &observed_rules());
    assert_eq!(diff_paths(&c), ["/Tags"]);
    assert_eq!(
        c.differences()[0].aws,
        Some(json!([{"Key": "a", "Value": "2"}]))
    );
    let extra = map(json!({"Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}]}));
    assert_eq!(
        diff_paths(&compare(&b, &extra, &CompareRules::default())),
        ["/Tags"]
    );
}

#[test]
fn unordered_lists_of_well_known_types_compare_as_sets() {
    let cases = [
        (
            "AWS::IAM::Role",
            json!({"ManagedPolicyArns": ["arn:aws:iam::aws:policy/A", "arn:aws:iam::aws:policy/B"]}),
            json!({"ManagedPolicyArns": ["arn:aws:iam::aws:policy/B", "arn:aws:iam::aws:policy/A"]}),
        ),
        (
            "AWS::EC2::SecurityGroup",
            json!({"SecurityGroupIngress": [
                {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "0.0.0.0/0"},
                {"IpProtocol": "tcp", "FromPort": 80, "ToPort": 80, "CidrIp": "0.0.0.0/0"}]}),
            json!({"SecurityGroupIngress": [
                {"IpProtocol": "tcp", "FromPort": "80", "ToPort": 80, "CidrIp": "0.0.0.0/0"},
                {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "0.0.0.0/0"}]}),
        ),
        (
            "AWS::SQS::QueuePolicy",
            json!({"Queues": ["https://sqs/1/a", "https://sqs/1/b"]}),
            json!({"Queues": ["https://sqs/1/b", "https://sqs/1/a"]}),
        ),
    ];
    for (ty, b, a) in cases {
        let (b, a) = (map(b), map(a));
        let c = compare(&b, &a, &CompareRules::for_type(ty, true));
        assert_eq!(c.classification, Classification::InSync, "{ty}");
        // Without the rule, the order is drift.
        let c = compare(&b, &a, &observed_rules());
        assert_eq!(c.status(), "drifted", "{ty}");
    }
}

#[test]
fn an_unordered_list_with_another_member_is_drift() {
    let rules = CompareRules::for_type("AWS::SQS::QueuePolicy", true);
    let b = map(json!({"Queues": ["a", "b"]}));
    let c = compare(&b, &map(json!({"Queues": ["b", "c"]})), &rules);
    assert_eq!(diff_paths(&c), ["/Queues"]);
    let c = compare(&b, &map(json!({"Queues": ["b"]})), &rules);
    assert_eq!(diff_paths(&c), ["/Queues"]);
}

#[test]
fn unordered_paths_given_by_the_caller_apply_to_nested_lists() {
    let mut rules = observed_rules();
    rules.unordered.insert("Interfaces/*/Groups".into());
    let b = map(json!({"Interfaces": [{"Groups": ["a", "b"]}]}));
    let a = map(json!({"Interfaces": [{"Groups": ["b", "a"]}]}));
    assert_eq!(
        compare(&b, &a, &rules).classification,
        Classification::InSync
    );
    let swapped = map(json!({"Interfaces": [{"Groups": ["a"]}, {"Groups": ["b"]}]}));
    assert_eq!(compare(&b, &swapped, &rules).status(), "drifted");
}

#[test]
fn values_aws_normalises_are_not_drift() {
    let b = map(json!({
        "Role": "arn:aws:iam::123456789012:role/service/MyRole",
        "Timeout": 5,
        "Count": "7",
        "Enabled": true,
        "Flag": "false",
        "Policy": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*"}]},
        "Text": "{\"a\": 1}",
    }));
    let a = map(json!({
        "Role": "MyRole",
        "Timeout": "5",
        "Count": 7,
        "Enabled": "true",
        "Flag": false,
        "Policy": "{\"Statement\":[{\"Action\":\"s3:*\",\"Effect\":\"Allow\"}],\"Version\":\"2012-10-17\"}",
        "Text": {"a": 1},
    }));
    let c = compare(&b, &a, &observed_rules());
    assert_eq!(c.classification, Classification::InSync, "{c:?}");
    let changed = map(json!({"Policy": "{\"Version\":\"2012-10-17\",\"Statement\":[]}"}));
    let c = compare(
        &map(json!({"Policy": b["Policy"].clone()})),
        &changed,
        &observed_rules(),
    );
    assert_eq!(diff_paths(&c), ["/Policy/Statement"]);
}

#[test]
fn write_only_properties_are_not_compared_and_reported() {
    let rules = CompareRules::for_type("AWS::RDS::DBInstance", false);
    let b =
        map(json!({"MasterUserPassword": "plain-in-template", "DBInstanceClass": "db.t3.micro"}));
    let a = map(json!({"DBInstanceClass": "db.t3.micro"}));
    let c = compare(&b, &a, &rules);
    assert_eq!(c.classification, Classification::InSync);
    assert_eq!(c.not_compared_write_only, ["/MasterUserPassword"]);
}

#[test]
fn an_object_of_write_only_keys_that_aws_leaves_out_is_not_compared() {
    let rules = CompareRules::for_type("AWS::Lambda::Function", false);
    let b = map(json!({"Code": {"ZipFile": "exports.handler = 1"}, "Timeout": 10}));
    let a = map(json!({"Timeout": 10}));
    let c = compare(&b, &a, &rules);
    assert_eq!(c.classification, Classification::InSync);
    assert_eq!(c.not_compared_write_only, ["/Code"]);
    let s3 = map(json!({"Code": {"S3Bucket": "b", "S3Key": "k"}}));
    assert_eq!(
        compare(&s3, &map(json!({})), &rules).classification,
        Classification::InSync
    );
    // One key AWS would return makes the missing object drift; so does an empty one.
    let mixed = map(json!({"Code": {"ZipFile": "x", "Other": 1}}));
    assert_eq!(
        diff_paths(&compare(&mixed, &map(json!({})), &rules)),
        ["/Code"]
    );
    let empty = map(json!({"Code": {}}));
    assert_eq!(
        diff_paths(&compare(&empty, &map(json!({})), &rules)),
        ["/Code"]
    );
}

#[test]
fn a_masked_position_alone_is_not_compared() {
    let b = map(json!({"Password": MASKED, "Name": "db"}));
    let a = map(json!({"Password": SECRET, "Name": "db"}));
    let c = compare(&b, &a, &observed_rules());
    assert_eq!(
        c.classification,
        Classification::NotCompared(vec!["/Password".into()])
    );
    assert_eq!(c.status(), "not-compared");
    assert_eq!(c.paths(), ["/Password"]);
    // Whatever AWS holds there.
    let a = map(json!({"Password": {"an": "object"}, "Name": "db"}));
    assert_eq!(compare(&b, &a, &observed_rules()).status(), "not-compared");
}

#[test]
fn drift_elsewhere_still_lists_the_masked_positions() {
    let b = map(json!({"Password": MASKED, "Name": "db"}));
    let a = map(json!({"Password": SECRET, "Name": "db2"}));
    let c = compare(&b, &a, &observed_rules());
    assert_eq!(diff_paths(&c), ["/Name"]);
    assert_eq!(c.masked, ["/Password"]);
}

#[test]
fn a_reference_compares_the_text_around_it() {
    let t = format!("user:{REF}@host");
    let b = map(json!({"Url": t}));
    let mut resolved = observed_rules();
    resolved.resolved.insert(REF, SECRET);
    let aws = map(json!({"Url": format!("user:{SECRET}@host")}));
    assert_eq!(
        compare(&b, &aws, &resolved).classification,
        Classification::InSync
    );
    // The secret could not be read: what is in the reference is not compared (never
    // "in sync"); the text around it still is.
    let c = compare(&b, &aws, &observed_rules());
    assert_eq!(
        c.classification,
        Classification::NotCompared(vec!["/Url".into()])
    );
    let whole = map(json!({"Url": REF}));
    assert_eq!(
        compare(&whole, &map(json!({"Url": "anything"})), &observed_rules()).classification,
        Classification::NotCompared(vec!["/Url".into()])
    );
    let c = compare(
        &b,
        &map(json!({"Url": format!("admin:{SECRET}@host")})),
        &observed_rules(),
    );
    assert_eq!(diff_paths(&c), ["/Url"]);
    let d = &c.differences()[0];
    assert_eq!(d.aws, Some(json!(MASKED)));
    assert!(d.masked);
    assert_eq!(d.recorded, Some(json!(t)));
}

#[test]
fn a_resolved_reference_is_compared_exactly() {
    let mut rules = observed_rules();
    rules.resolved.insert(REF, SECRET);
    let b = map(json!({"P": REF, "U": format!("u:{REF}")}));
    let same = map(json!({"P": SECRET, "U": format!("u:{SECRET}")}));
    assert_eq!(
        compare(&b, &same, &rules).classification,
        Classification::InSync
    );
    let rotated = map(json!({"P": "other", "U": "u:other"}));
    let c = compare(&b, &rotated, &rules);
    assert_eq!(diff_paths(&c), ["/P", "/U"]);
    assert!(c.differences().iter().all(|d| d.aws == Some(json!(MASKED))));
}

#[test]
fn a_changed_list_holding_a_secret_never_shows_aws_items() {
    let b = map(json!({"Args": [MASKED, "a"]}));
    for a in [
        json!({"Args": ["a", SECRET]}),
        json!({"Args": ["x", SECRET, "a"]}),
    ] {
        let c = compare(&b, &map(a), &observed_rules());
        assert_eq!(diff_paths(&c), ["/Args"]);
        assert_eq!(c.differences()[0].aws, Some(json!(MASKED)));
        assert_eq!(c.masked, ["/Args/0"]);
        assert!(!format!("{c:?}").contains(SECRET));
    }
}

#[test]
fn template_masks_are_not_compared_in_the_fallback() {
    let b = map(json!({"Password": NOECHO, "Name": "x"}));
    let a = map(json!({"Password": SECRET, "Name": "x", "Extra": 1}));
    let c = compare(&b, &a, &CompareRules::default());
    assert_eq!(c.status(), "not-compared");
    assert_eq!(c.masked, ["/Password"]);
}

// ---- accept ----

#[test]
fn accept_takes_aws_values_and_keeps_secrets_out() {
    let b = map(json!({"Password": MASKED, "Url": format!("u:{REF}"), "Name": "a"}));
    let a = map(json!({"Password": SECRET, "Url": format!("u:{SECRET}"), "Name": "b", "New": 1}));
    let out = accept(&b, &a, &["/Password".into()], &observed_rules()).unwrap();
    assert_eq!(
        out.baseline,
        map(json!({"Password": MASKED, "Url": format!("u:{REF}"), "Name": "b", "New": 1}))
    );
    assert_eq!(out.masked, ["/Password"]);
}

#[test]
fn accept_refuses_a_drifted_masked_position() {
    // The masked key is gone.
    let b = map(json!({"Password": MASKED, "Name": "a"}));
    let a = map(json!({"Name": "a"}));
    let e = accept(&b, &a, &["/Password".into()], &observed_rules()).unwrap_err();
    assert_eq!(
        e,
        AcceptRefused::MaskedPositionDrifted {
            masked: "/Password".into(),
            difference: "/Password".into()
        }
    );
    assert!(e.to_string().contains("/Password"));
    // The list holding the masked item no longer lines up.
    let b = map(json!({"Args": [MASKED, "a"]}));
    let a = map(json!({"Args": ["x", SECRET, "a"]}));
    let e = accept(&b, &a, &[], &observed_rules()).unwrap_err();
    assert_eq!(
        e,
        AcceptRefused::MaskedPositionDrifted {
            masked: "/Args/0".into(),
            difference: "/Args".into()
        }
    );
    // A masked object replaced by a value of another shape above it.
    let b = map(json!({"Cfg": {"Pass": MASKED}}));
    let a = map(json!({"Cfg": "text"}));
    assert!(accept(&b, &a, &[], &observed_rules()).is_err());
}

#[test]
fn accept_does_not_refuse_drift_away_from_masked_positions() {
    let b = map(json!({"Password": MASKED, "Name": "a"}));
    let a = map(json!({"Password": "anything", "Name": "b"}));
    let out = accept(&b, &a, &["/Password".into()], &observed_rules()).unwrap();
    assert_eq!(out.baseline, map(json!({"Password": MASKED, "Name": "b"})));
}

#[test]
fn accept_masks_a_reference_that_no_longer_fits() {
    let b = map(json!({"Url": format!("u:{REF}")}));
    let a = map(json!({"Url": format!("v:{SECRET}")}));
    let out = accept(&b, &a, &[], &observed_rules()).unwrap();
    assert_eq!(out.baseline, map(json!({"Url": MASKED})));
    assert_eq!(out.masked, ["/Url"]);
}

#[test]
fn overlapping_pointers() {
    assert!(overlaps("/a", "/a"));
    assert!(overlaps("/a", "/a/b"));
    assert!(overlaps("/a/b", "/a"));
    assert!(overlaps("", "/a"));
    assert!(!overlaps("/a", "/ab"));
    assert!(!overlaps("/a/b", "/a/c"));
}
