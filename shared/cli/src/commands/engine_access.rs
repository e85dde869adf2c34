//! Who may start a deploy by putting an object under `deploy/` of the engine bucket: one
//! statement of the bucket's policy per engine (`Sid` `StackflowDeployers<name>`), an
//! explicit deny of writes there to every principal that is not a deployer. S3 evaluates
//! an explicit deny in a bucket policy for callers of every account, the bucket's own
//! included. The bucket is made before the engine's template and may serve several
//! engines of the account, so `engine deploy` keeps its own statement and leaves the
//! others, and `engine destroy` takes it out.

use serde_json::{Value, json};

fn sid(engine: &str) -> String {
    let clean: String = engine
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    format!("StackflowDeployers{clean}")
}

/// The deny statement of engine `engine` for `deployers`.
pub fn statement(partition: &str, bucket: &str, engine: &str, deployers: &[String]) -> Value {
    json!({
        "Sid": sid(engine),
        "Effect": "Deny",
        "Principal": "*",
        "Action": ["s3:PutObject", "s3:DeleteObject"],
        "Resource": format!("arn:{partition}:s3:::{bucket}/deploy/*"),
        "Condition": {"ArnNotLike": {"aws:PrincipalArn": deployers}}
    })
}

/// `policy` (the bucket's, `None` when it has none) with the statement of `engine` set to
/// `statement`, or taken out when `None`; every other statement kept as it is. `None`
/// when no statement is left.
pub fn merged(
    policy: Option<&str>,
    engine: &str,
    statement: Option<Value>,
) -> anyhow::Result<Option<String>> {
    let mut doc: Value = match policy {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("the engine bucket's policy is not JSON: {e}"))?,
        None => json!({"Version": "2012-10-17", "Statement": []}),
    };
    let statements = match doc.get_mut("Statement") {
        Some(Value::Array(a)) => a,
        Some(one @ Value::Object(_)) => {
            *one = Value::Array(vec![one.take()]);
            one.as_array_mut().expect("just made an array")
        }
        _ => anyhow::bail!("the engine bucket's policy has no Statement list"),
    };
    let own = sid(engine);
    statements.retain(|s| s.get("Sid").and_then(Value::as_str) != Some(own.as_str()));
    if let Some(s) = statement {
        statements.push(s);
    }
    if statements.is_empty() {
        return Ok(None);
    }
    Ok(Some(doc.to_string()))
}

/// The bucket's policy now, `None` when it has none.
async fn current(s3: &aws_sdk_s3::Client, bucket: &str) -> anyhow::Result<Option<String>> {
    match s3.get_bucket_policy().bucket(bucket).send().await {
        Ok(out) => Ok(out.policy),
        Err(e) => {
            let code = e
                .as_service_error()
                .and_then(|s| aws_sdk_s3::error::ProvideErrorMetadata::code(s).map(str::to_string));
            if code.as_deref() == Some("NoSuchBucketPolicy") {
                Ok(None)
            } else {
                anyhow::bail!(
                    "GetBucketPolicy s3://{bucket}: {}",
                    crate::aws::brief_error(&e)
                )
            }
        }
    }
}

/// Sets (or, with `deployers` `None`, takes out) the statement of `engine` in the bucket's
/// policy.
pub async fn apply(
    s3: &aws_sdk_s3::Client,
    partition: &str,
    bucket: &str,
    engine: &str,
    deployers: Option<&[String]>,
) -> anyhow::Result<()> {
    let now = current(s3, bucket).await?;
    let statement = deployers.map(|d| statement(partition, bucket, engine, d));
    let next = merged(now.as_deref(), engine, statement)?;
    if next == now {
        return Ok(());
    }
    let done = match &next {
        Some(policy) => s3
            .put_bucket_policy()
            .bucket(bucket)
            .policy(policy)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| crate::aws::brief_error(&e)),
        None => s3
            .delete_bucket_policy()
            .bucket(bucket)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| crate::aws::brief_error(&e)),
    };
    done.map_err(|e| anyhow::anyhow!("the policy of s3://{bucket}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployers() -> Vec<String> {
        vec!["arn:aws:iam::123456789012:role/ci".to_string()]
    }

    #[test]
    fn the_statement_denies_deploy_writes_to_all_but_the_deployers() {
        let s = statement("aws", "b", "stackflow", &deployers());
        assert_eq!(s["Effect"], "Deny");
        assert_eq!(s["Resource"], "arn:aws:s3:::b/deploy/*");
        assert_eq!(
            s["Condition"]["ArnNotLike"]["aws:PrincipalArn"][0],
            "arn:aws:iam::123456789012:role/ci"
        );
        assert_eq!(s["Sid"], "StackflowDeployersstackflow");
    }

    #[test]
    fn an_engines_statement_is_set_or_taken_out_and_the_others_kept() {
        let theirs =
            json!({"Version": "2012-10-17", "Statement": {"Sid": "TLS", "Effect": "Deny"}});
        let one = statement("aws", "b", "e-1", &deployers());
        let with = merged(Some(&theirs.to_string()), "e-1", Some(one.clone()))
            .unwrap()
            .unwrap();
        let doc: Value = serde_json::from_str(&with).unwrap();
        assert_eq!(doc["Statement"].as_array().unwrap().len(), 2);
        assert_eq!(doc["Statement"][0]["Sid"], "TLS");
        // Set again: replaced, not added.
        let again = merged(Some(&with), "e-1", Some(one.clone()))
            .unwrap()
            .unwrap();
        assert_eq!(again, with);
        // Another engine's statement beside it.
        let other = statement("aws", "b", "e2", &deployers());
        let both = merged(Some(&with), "e2", Some(other)).unwrap().unwrap();
        let doc: Value = serde_json::from_str(&both).unwrap();
        assert_eq!(doc["Statement"].as_array().unwrap().len(), 3);
        // Taken out: the others stay; with none left, no policy.
        let out = merged(Some(&both), "e-1", None).unwrap().unwrap();
        assert!(!out.contains("StackflowDeployerse1"), "{out}");
        assert!(out.contains("StackflowDeployerse2") && out.contains("TLS"));
        let only = merged(None, "e-1", Some(one)).unwrap().unwrap();
        assert_eq!(merged(Some(&only), "e-1", None).unwrap(), None);
        assert!(merged(Some("not json"), "e-1", None).is_err());
    }
}
