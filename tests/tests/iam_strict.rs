//! The installed engine's permissions under enforced IAM (fakecloud `--iam strict`, which
//! evaluates identity policies and the resource policies of S3, EventBridge, Lambda, SQS,
//! SNS, KMS, DynamoDB and STS trust, with their conditions; its root, the test
//! credentials, is never refused). Functions run as sessions of their own roles (the last
//! test proves it). The engine is installed with the suites' types;
//! then, acting as its roles (each through a probe role the test makes and assumes, given
//! the role's own inline and managed policies read from IAM: the engine's roles trust
//! Lambda or the functions' roles alone, and the emulator checks trust policies):
//! - a function's role may write the engine bucket's inputs but not its artifacts
//!   (`assets/`) nor the objects that start a deploy (`deploy/`): the artifact guard;
//! - the provisioning role may make what it was allowed (a topic) and not what it was not
//!   (a bucket): no AdministratorAccess, only the allowed services;
//! - a principal that is not a named deployer, though its own policy lets it write the
//!   bucket, can start no deploy by object: its object under `deploy/` is refused by the
//!   bucket's policy (and the engine's bus has its deny-all-but-deployers policy: the
//!   emulator does not evaluate bus policies, so that refusal is not shown).

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
    let installed = Installed::install(emu, &["--parameter", "Triggers=on"]).await;
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

    not_a_deployer_starts_nothing(&config, &iam, &name).await;
    installed.destroy(&["--delete-table"]);
}

/// A user whose own policy allows writing the engine bucket, not named a deployer: refused
/// under `deploy/`, allowed elsewhere (what refuses it is the bucket's policy, not its
/// own); and the engine's bus, which only the deployers may send to.
async fn not_a_deployer_starts_nothing(
    config: &aws_types::SdkConfig,
    iam: &aws_sdk_iam::Client,
    engine: &str,
) {
    let user = format!("{engine}-intruder");
    iam.create_user().user_name(&user).send().await.unwrap();
    let allow = serde_json::json!({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:PutObject"],
         "Resource": format!("arn:aws:s3:::{ENGINE_BUCKET}/*")}]});
    iam.put_user_policy()
        .user_name(&user)
        .policy_name("writes")
        .policy_document(allow.to_string())
        .send()
        .await
        .unwrap();
    let key = iam
        .create_access_key()
        .user_name(&user)
        .send()
        .await
        .unwrap();
    let key = key.access_key().expect("an access key");
    let credentials = Credentials::new(
        key.access_key_id(),
        key.secret_access_key(),
        None,
        None,
        "intruder",
    );
    let intruder = config
        .to_builder()
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .build();

    let bucket = s3(&intruder);
    assert!(
        put_denied(&bucket, "deploy/app/template.json").await,
        "an object that would start a deploy"
    );
    assert!(
        !put_denied(&bucket, "inputs/intruder/note.json").await,
        "its own policy is enough elsewhere"
    );

    // The engine's bus: its policy, read back, denies every sender but the deployers.
    // fakecloud 0.51.0 evaluates no event bus policy on PutEvents (an event from a
    // non-deployer, of this account or another, is accepted), so the refusal itself is
    // not shown here; AWS evaluates the policy for every sender, its account's included.
    let bus = format!("{engine}-deploys");
    let policy = aws_sdk_eventbridge::Client::new(config)
        .describe_event_bus()
        .name(&bus)
        .send()
        .await
        .expect("the engine's bus")
        .policy()
        .map(|p| serde_json::from_str::<serde_json::Value>(p).expect("a JSON policy"))
        .expect("the bus has a policy");
    assert_eq!(
        policy["Statement"][0],
        serde_json::json!({"Sid": "OnlyDeployersSend", "Effect": "Deny", "Principal": "*",
            "Action": "events:PutEvents",
            "Resource": format!("arn:aws:events:us-east-1:123456789012:event-bus/{bus}"),
            "Condition": {"ArnNotLike": {"aws:PrincipalArn": ["arn:aws:iam::123456789012:root"]}}}),
        "{policy}"
    );
    let _ = iam
        .delete_access_key()
        .user_name(&user)
        .access_key_id(key.access_key_id())
        .send()
        .await;
    let _ = iam
        .delete_user_policy()
        .user_name(&user)
        .policy_name("writes")
        .send()
        .await;
    let _ = iam.delete_user().user_name(&user).send().await;
}

/// A Node.js handler that lists the account's SSM parameters with the credentials Lambda
/// gave it, and says how that went and which key it used.
const READ_OBJECT: &str = r#"
const { S3 } = require('@aws-sdk/client-s3');
exports.handler = async (event) => {
  const key = process.env.AWS_ACCESS_KEY_ID;
  try {
    await new S3({ forcePathStyle: true }).getObject({ Bucket: event.bucket, Key: 'note' });
    return { read: true, key };
  } catch (e) {
    return { read: false, error: `${e.name}: ${e.message}`, key };
  }
};
"#;

/// Functions call AWS as a session of their own role, as Lambda's functions do (the
/// emulator mints one per instance and the stand-in hands it to the process), not as the
/// emulator's root, which is never refused: a function whose role allows nothing is
/// refused an object, and reads it once its role allows it. What the engine's functions may do
/// is then what `infra/engine.yaml` gives their roles (the chain's run under enforced IAM).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_calls_aws_as_a_session_of_its_own_role() {
    use aws_sdk_lambda::primitives::Blob;
    use aws_sdk_lambda::types::{FunctionCode, Runtime};
    use serde_json::{Value, json};

    let emu = Emulator::strict().await;
    let config = emu.sdk_config().await;
    let iam = aws_sdk_iam::Client::new(&config);
    let lambda = aws_sdk_lambda::Client::new(&config);
    let name = stackflow_tests::unique_name("fn-role");
    let lambda_service = json!({"Service": "lambda.amazonaws.com"});
    let role_arn = stackflow_tests::iam::create_role(&iam, &name, lambda_service).await;
    let zip = stackflow_tests::lambda::zip_files(&[("index.js", READ_OBJECT.as_bytes())]);
    lambda
        .create_function()
        .function_name(&name)
        .runtime(Runtime::Nodejs22x)
        .handler("index.handler")
        .role(&role_arn)
        .timeout(30)
        .code(FunctionCode::builder().zip_file(Blob::new(zip)).build())
        .send()
        .await
        .unwrap();
    // An object the function's role may not read until the test lets it.
    let bucket = name.to_lowercase();
    let s3_root = s3(&config);
    s3_root
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    s3_root
        .put_object()
        .bucket(&bucket)
        .key("note")
        .body(b"hello".to_vec().into())
        .send()
        .await
        .unwrap();
    let event = json!({"bucket": bucket}).to_string();
    let invoke = || async {
        let out = lambda
            .invoke()
            .function_name(&name)
            .payload(Blob::new(event.clone()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}", aws_sdk_lambda::error::DisplayErrorContext(e)));
        let payload = out
            .payload()
            .map(|p| p.as_ref().to_vec())
            .unwrap_or_default();
        serde_json::from_slice::<Value>(&payload).unwrap()
    };

    let refused = invoke().await;
    assert_eq!(refused["read"], json!(false), "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or("")
            .contains("AccessDenied"),
        "{refused}"
    );
    assert_ne!(
        refused["key"],
        json!("test"),
        "not the emulator's root: {refused}"
    );

    let objects = format!("arn:aws:s3:::{bucket}/*");
    stackflow_tests::iam::allow(&iam, &name, "read", &["s3:GetObject"], &objects).await;
    let allowed = invoke().await;
    assert_eq!(allowed["read"], json!(true), "{allowed}");

    lambda
        .delete_function()
        .function_name(&name)
        .send()
        .await
        .unwrap();
    let _ = iam
        .delete_role_policy()
        .role_name(&name)
        .policy_name("read")
        .send()
        .await;
    iam.delete_role().role_name(&name).send().await.unwrap();
}
