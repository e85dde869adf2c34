//! The installed engine's permissions under enforced IAM (fakecloud `--iam strict`, which
//! evaluates identity policies: Allow and Deny, actions and resources with wildcards; not
//! yet conditions or resource policies). The engine is installed with the suites' types;
//! then, acting as its roles (each through a probe role the test makes and assumes, given
//! the role's own inline and managed policies read from IAM: the engine's roles trust
//! Lambda or the functions' roles alone, and the emulator checks trust policies):
//! - a function's role may write the engine bucket's inputs but not its artifacts
//!   (`assets/`) nor the objects that start a deploy (`deploy/`): the artifact guard;
//! - the provisioning role may make what it was allowed (a topic) and not what it was not
//!   (a bucket): no AdministratorAccess, only the allowed services.

use aws_sdk_s3::config::{Credentials, SharedCredentialsProvider};
use stackflow_tests::Emulator;
use stackflow_tests::installed::{ENGINE_BUCKET, Installed, policy_document};

/// A role made by the test with the policies of another.
struct Probe {
    role: String,
    attached: Vec<String>,
    inline: Vec<String>,
}

impl Probe {
    async fn delete(&self, iam: &aws_sdk_iam::Client) {
        for arn in &self.attached {
            let _ = iam
                .detach_role_policy()
                .role_name(&self.role)
                .policy_arn(arn)
                .send()
                .await;
        }
        for name in &self.inline {
            let _ = iam
                .delete_role_policy()
                .role_name(&self.role)
                .policy_name(name)
                .send()
                .await;
        }
        iam.delete_role()
            .role_name(&self.role)
            .send()
            .await
            .unwrap();
    }
}

/// Role `probe`, trusting the account's root, with the inline policies and the managed
/// policies of role `like`, read from IAM.
async fn probe_like(iam: &aws_sdk_iam::Client, like: &str, probe: &str) -> Probe {
    let trust = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "sts:AssumeRole"}]});
    iam.create_role()
        .role_name(probe)
        .assume_role_policy_document(trust.to_string())
        .send()
        .await
        .unwrap();
    let mut made = Probe {
        role: probe.to_string(),
        attached: vec![],
        inline: vec![],
    };
    let names = iam
        .list_role_policies()
        .role_name(like)
        .send()
        .await
        .unwrap();
    for policy in names.policy_names() {
        let got = iam
            .get_role_policy()
            .role_name(like)
            .policy_name(policy)
            .send()
            .await
            .unwrap();
        iam.put_role_policy()
            .role_name(probe)
            .policy_name(policy)
            .policy_document(policy_document(got.policy_document()))
            .send()
            .await
            .unwrap();
        made.inline.push(policy.to_string());
    }
    let attached = iam
        .list_attached_role_policies()
        .role_name(like)
        .send()
        .await
        .unwrap();
    for policy in attached.attached_policies() {
        let arn = policy.policy_arn().unwrap().to_string();
        iam.attach_role_policy()
            .role_name(probe)
            .policy_arn(&arn)
            .send()
            .await
            .unwrap();
        made.attached.push(arn);
    }
    assert!(
        !made.inline.is_empty() && !made.attached.is_empty(),
        "{like}'s policies"
    );
    made
}

/// `config` acting as a session of role `role` (assumed by the emulator's root).
async fn as_role(config: &aws_types::SdkConfig, role: &str) -> aws_types::SdkConfig {
    let sts = aws_sdk_sts::Client::new(config);
    let assumed = sts
        .assume_role()
        .role_arn(format!("arn:aws:iam::123456789012:role/{role}"))
        .role_session_name("iam-strict-test")
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "AssumeRole {role}: {}",
                aws_sdk_sts::error::DisplayErrorContext(e)
            )
        });
    let c = assumed.credentials().expect("credentials");
    let credentials = Credentials::new(
        c.access_key_id(),
        c.secret_access_key(),
        Some(c.session_token().to_string()),
        None,
        "assumed",
    );
    config
        .to_builder()
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .build()
}

fn s3(config: &aws_types::SdkConfig) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(config)
            .force_path_style(true)
            .build(),
    )
}

/// Whether `PutObject key` is refused as access denied (anything else fails the test).
async fn put_denied(s3: &aws_sdk_s3::Client, key: &str) -> bool {
    match s3
        .put_object()
        .bucket(ENGINE_BUCKET)
        .key(key)
        .body(b"probe".to_vec().into())
        .send()
        .await
    {
        Ok(_) => false,
        Err(e) => {
            let text = format!("{}", aws_sdk_s3::error::DisplayErrorContext(&e));
            assert!(text.contains("AccessDenied"), "{key}: {text}");
            true
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_roles_may_do_what_they_were_given_and_no_more() {
    let emu = Emulator::strict().await;
    let installed = Installed::install(emu, &["--parameter", "Triggers=off"]).await;
    let config = emu.sdk_config().await;
    let name = installed.name.clone();

    // A function's role trusts Lambda alone (the emulator checks trust policies), so its
    // policies are put on a probe role the test may assume: the same inline policy, the
    // same artifact guard, nothing of the engine's changed.
    let iam = aws_sdk_iam::Client::new(&config);
    let probe = probe_like(&iam, &format!("{name}-fn-plan"), &format!("{name}-probe")).await;
    let plan = s3(&as_role(&config, &probe.role).await);
    assert!(
        !put_denied(&plan, "inputs/iam-strict/probe.json").await,
        "its own prefix"
    );
    assert!(put_denied(&plan, "assets/evil.zip").await, "the artifacts");
    assert!(
        put_denied(&plan, "deploy/app/template.json").await,
        "the deploy objects"
    );
    probe.delete(&iam).await;

    // The provisioning role trusts the functions' roles alone: the same probe.
    let probe = probe_like(
        &iam,
        &format!("{name}-provisioning"),
        &format!("{name}-probe-provisioning"),
    )
    .await;
    let provisioning = as_role(&config, &probe.role).await;
    let sns = aws_sdk_sns::Client::new(&provisioning);
    let topic = sns
        .create_topic()
        .name(format!("{name}-allowed"))
        .send()
        .await
        .expect("an allowed service: sns:*");
    let made = s3(&provisioning)
        .create_bucket()
        .bucket(format!("{name}-not-allowed"))
        .send()
        .await;
    let e = made.expect_err("S3 is not among the allowed types");
    let text = format!("{}", aws_sdk_s3::error::DisplayErrorContext(&e));
    assert!(text.contains("AccessDenied"), "{text}");
    assert!(put_denied(&s3(&provisioning), "assets/evil.zip").await);

    aws_sdk_sns::Client::new(&config)
        .delete_topic()
        .topic_arn(topic.topic_arn().unwrap_or_default())
        .send()
        .await
        .unwrap();
    probe.delete(&iam).await;
    installed.destroy(&["--delete-table"]);
}
