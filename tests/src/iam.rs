//! IAM in tests: roles (one another account may take, one trusting a principal), an
//! inline policy put on a role, and read back as its document text.

/// The role `name` of the account of `there`, which `caller`'s account may assume (as
/// CDK's bootstrap roles trust the accounts they serve); made once for every test of an
/// emulator (one that exists is taken as it is).
pub async fn role_trusting(there: &aws_types::SdkConfig, name: &str, caller: &str) {
    let trust = trust(serde_json::json!({"AWS": format!("arn:aws:iam::{caller}:root")}));
    let made = aws_sdk_iam::Client::new(there)
        .create_role()
        .role_name(name)
        .assume_role_policy_document(trust.to_string())
        .send()
        .await;
    if let Err(e) = made {
        let e = aws_sdk_iam::error::DisplayErrorContext(e).to_string();
        assert!(e.contains("EntityAlreadyExists"), "CreateRole {name}: {e}");
    }
}

/// A trust policy that lets `principal` assume the role.
fn trust(principal: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": principal, "Action": "sts:AssumeRole"}]})
}

/// Makes role `name` trusting `principal` (an IAM `Principal` value, e.g.
/// `{"Service": "lambda.amazonaws.com"}`); its ARN.
pub async fn create_role(
    iam: &aws_sdk_iam::Client,
    name: &str,
    principal: serde_json::Value,
) -> String {
    let trust = trust(principal);
    let made = iam
        .create_role()
        .role_name(name)
        .assume_role_policy_document(trust.to_string())
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "CreateRole {name}: {}",
                aws_sdk_iam::error::DisplayErrorContext(&e)
            )
        });
    made.role()
        .map(|r| r.arn().to_string())
        .expect("the role's ARN")
}

/// Puts inline policy `name` on `role`: `actions` allowed on `resource`.
pub async fn allow(
    iam: &aws_sdk_iam::Client,
    role: &str,
    name: &str,
    actions: &[&str],
    resource: &str,
) {
    let policy = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Action": actions, "Resource": resource}]});
    iam.put_role_policy()
        .role_name(role)
        .policy_name(name)
        .policy_document(policy.to_string())
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "policy {name} of role {role}: {}",
                aws_sdk_iam::error::DisplayErrorContext(&e)
            )
        });
}

/// The document of inline policy `name` of `role`, as text (IAM answers it URL-encoded).
pub async fn role_policy_document(iam: &aws_sdk_iam::Client, role: &str, name: &str) -> String {
    let policy = iam
        .get_role_policy()
        .role_name(role)
        .policy_name(name)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "policy {name} of role {role}: {}",
                aws_sdk_iam::error::DisplayErrorContext(&e)
            )
        });
    percent_decoded(policy.policy_document())
}

/// `text` with its `%XX` escapes decoded.
pub fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_are_decoded_and_the_rest_kept() {
        assert_eq!(super::percent_decoded("a%20b%2Fc%zz%"), "a b/c%zz%");
    }
}
