//! `AwsLookups` (the engine's AWS lookups for intrinsic functions, template parameters and
//! dynamic references) against the local emulator (fakecloud 0.51.0): availability zones
//! through the EC2 SDK client (`DescribeAvailabilityZones`), CloudFormation exports and
//! stack outputs, SSM parameters and Secrets Manager secrets.
//!
//! All tests share one emulator (`Emulator::shared`) and run in parallel; every resource
//! name comes from `unique_name`.

use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use aws_sdk_ssm::types::ParameterType;
use aws_smithy_types::error::display::DisplayErrorContext;
use serde_json::{Value, json};
use stackflow_core::dynref::DynamicReference;
use stackflow_core::intrinsics::StackOutputRef;
use stackflow_engine::lookups::Lookups;
use stackflow_providers::lookups::AwsLookups;
use stackflow_tests::{Emulator, unique_name};

/// Turns an SDK error into an `anyhow` error that shows the whole cause chain.
trait SdkContext<T> {
    fn ctx(self, what: &str) -> Result<T>;
}

impl<T, E> SdkContext<T> for std::result::Result<T, E>
where
    E: std::error::Error,
{
    fn ctx(self, what: &str) -> Result<T> {
        self.map_err(|e| anyhow!("{what}: {}", DisplayErrorContext(&e)))
    }
}

/// Waits (up to 30 s) until CloudFormation stack `stack` is `CREATE_COMPLETE`.
async fn created(cfn: &aws_sdk_cloudformation::Client, stack: &str) -> Result<()> {
    use aws_sdk_cloudformation::types::StackStatus;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let described = cfn.describe_stacks().stack_name(stack).send().await;
        let status = described
            .ctx("DescribeStacks")?
            .stacks()
            .first()
            .and_then(|s| s.stack_status())
            .cloned();
        match status {
            Some(StackStatus::CreateInProgress) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Some(StackStatus::CreateComplete) => return Ok(()),
            other => bail!("stack {stack} is {other:?}"),
        }
    }
}

async fn lookups() -> AwsLookups {
    let emulator = Emulator::shared().await;
    AwsLookups::new(&emulator.sdk_config().await)
}

#[tokio::test]
async fn availability_zones_through_ec2() -> Result<()> {
    let lookups = lookups().await;
    let zones = lookups.availability_zones("us-east-1").await?;
    assert_eq!(
        zones,
        [
            "us-east-1a",
            "us-east-1b",
            "us-east-1c",
            "us-east-1d",
            "us-east-1e",
            "us-east-1f"
        ]
    );
    // Quirk: fakecloud answers for the region the request is signed for, as AWS
    // answers for the region of its endpoint.
    let zones = lookups.availability_zones("eu-west-1").await?;
    assert!(!zones.is_empty(), "no zones in eu-west-1");
    assert!(
        zones.iter().all(|z| z.starts_with("eu-west-1")),
        "{zones:?}"
    );
    let mut sorted = zones.clone();
    sorted.sort();
    assert_eq!(zones, sorted);
    Ok(())
}

#[tokio::test]
async fn availability_zones_without_an_endpoint_fail_readably() -> Result<()> {
    // Nothing listens on port 1: the call fails (fast) with a LookupError, not a panic.
    let emulator = Emulator::shared().await;
    let config = emulator
        .sdk_config()
        .await
        .into_builder()
        .endpoint_url("http://127.0.0.1:1")
        .build();
    let err = AwsLookups::new(&config)
        .availability_zones("us-east-1")
        .await
        .expect_err("nothing listens on port 1");
    assert_eq!(err.what, "availability zones of us-east-1");
    assert!(err.message.contains("127.0.0.1:1"), "{err}");
    Ok(())
}

#[tokio::test]
async fn ssm_parameters_strings_and_lists() -> Result<()> {
    let emulator = Emulator::shared().await;
    let ssm = aws_sdk_ssm::Client::new(&emulator.sdk_config().await);
    let lookups = lookups().await;
    let base = format!("/stackflow/{}", unique_name("lookups"));
    let plain = format!("{base}/plain");
    let list = format!("{base}/list");
    for (name, value, kind) in [
        (&plain, "v1", ParameterType::String),
        (&list, "a,b,c", ParameterType::StringList),
    ] {
        ssm.put_parameter()
            .name(name)
            .value(value)
            .r#type(kind)
            .send()
            .await
            .ctx("PutParameter")?;
    }

    assert_eq!(lookups.ssm_parameter(&plain).await?, Some(json!("v1")));
    assert_eq!(
        lookups.ssm_parameter(&list).await?,
        Some(json!(["a", "b", "c"]))
    );
    assert_eq!(
        lookups.ssm_parameter(&format!("{base}/missing")).await?,
        None
    );

    // Dynamic references: the current value and a version.
    ssm.put_parameter()
        .name(&plain)
        .value("v2")
        .r#type(ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .ctx("PutParameter with Overwrite")?;
    let current: DynamicReference = format!("{{{{resolve:ssm:{plain}}}}}").parse()?;
    assert_eq!(lookups.dynamic_reference(&current).await?, "v2");
    let first: DynamicReference = format!("{{{{resolve:ssm:{plain}:1}}}}").parse()?;
    assert_eq!(lookups.dynamic_reference(&first).await?, "v1");
    let missing: DynamicReference = format!("{{{{resolve:ssm:{base}/missing}}}}").parse()?;
    let err = lookups
        .dynamic_reference(&missing)
        .await
        .expect_err("a missing parameter");
    assert!(err.message.contains("there is no parameter"), "{err}");

    for name in [&plain, &list] {
        ssm.delete_parameter()
            .name(name)
            .send()
            .await
            .ctx("DeleteParameter")?;
    }
    Ok(())
}

#[tokio::test]
async fn ssm_secure_strings() -> Result<()> {
    let emulator = Emulator::shared().await;
    let ssm = aws_sdk_ssm::Client::new(&emulator.sdk_config().await);
    let lookups = lookups().await;
    let name = format!("/stackflow/{}/secure", unique_name("lookups"));
    ssm.put_parameter()
        .name(&name)
        .value("hunter2")
        .r#type(ParameterType::SecureString)
        .send()
        .await
        .ctx("PutParameter SecureString")?;

    let secure: DynamicReference = format!("{{{{resolve:ssm-secure:{name}}}}}").parse()?;
    assert_eq!(lookups.dynamic_reference(&secure).await?, "hunter2");
    // `ssm` refuses a SecureString, like CloudFormation, and does not show it.
    let plain: DynamicReference = format!("{{{{resolve:ssm:{name}}}}}").parse()?;
    let err = lookups
        .dynamic_reference(&plain)
        .await
        .expect_err("ssm of a SecureString");
    assert!(err.message.contains("ssm-secure"), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    // A template parameter of an SSM type that names a SecureString is refused too.
    let err = lookups
        .ssm_parameter(&name)
        .await
        .expect_err("an SSM-typed parameter naming a SecureString");
    assert!(err.message.contains("SecureString"), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    // A CDK context lookup (`valueFromLookup`) of it is refused: its value would be saved
    // in cdk.context.json and the template.
    let err = lookups
        .parameter_text(&name)
        .await
        .expect_err("a context lookup of a SecureString");
    assert!(err.message.contains("cdk.context.json"), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
    assert_eq!(lookups.parameter_text(&format!("{name}-none")).await?, None);

    ssm.delete_parameter()
        .name(&name)
        .send()
        .await
        .ctx("DeleteParameter")?;
    Ok(())
}

#[tokio::test]
async fn secretsmanager_secrets_and_json_keys() -> Result<()> {
    let emulator = Emulator::shared().await;
    let secrets = aws_sdk_secretsmanager::Client::new(&emulator.sdk_config().await);
    let lookups = lookups().await;
    let name = format!("stackflow/{}", unique_name("secret"));
    let value = json!({"username": "app", "password": "s3cr3t!pw", "port": 5432});
    let created = secrets
        .create_secret()
        .name(&name)
        .secret_string(value.to_string())
        .send()
        .await
        .ctx("CreateSecret")?;
    let arn = created.arn().context("no ARN")?.to_string();

    for id in [&name, &arn] {
        let key: DynamicReference =
            format!("{{{{resolve:secretsmanager:{id}:SecretString:password}}}}").parse()?;
        assert_eq!(lookups.dynamic_reference(&key).await?, "s3cr3t!pw");
    }
    let port: DynamicReference =
        format!("{{{{resolve:secretsmanager:{name}:SecretString:port}}}}").parse()?;
    assert_eq!(lookups.dynamic_reference(&port).await?, "5432");
    let whole: DynamicReference = format!("{{{{resolve:secretsmanager:{name}}}}}").parse()?;
    let text = lookups.dynamic_reference(&whole).await?;
    assert_eq!(serde_json::from_str::<Value>(&text)?, value);
    let staged: DynamicReference =
        format!("{{{{resolve:secretsmanager:{name}:SecretString:username:AWSCURRENT}}}}")
            .parse()?;
    assert_eq!(lookups.dynamic_reference(&staged).await?, "app");

    // A missing key is an error that names the key and never shows the secret.
    let missing: DynamicReference =
        format!("{{{{resolve:secretsmanager:{name}:SecretString:passwd}}}}").parse()?;
    let err = lookups
        .dynamic_reference(&missing)
        .await
        .expect_err("a missing json key");
    let text = err.to_string();
    assert!(text.contains("\"passwd\""), "{text}");
    assert!(text.contains(&name), "{text}");
    for secret in ["s3cr3t!pw", "app", "5432"] {
        assert!(!text.contains(secret), "the error shows {secret}: {text}");
    }

    // A missing secret: the service's code and message.
    let gone: DynamicReference =
        format!("{{{{resolve:secretsmanager:{name}-missing}}}}").parse()?;
    let err = lookups
        .dynamic_reference(&gone)
        .await
        .expect_err("a missing secret");
    assert!(
        err.message.starts_with("ResourceNotFoundException"),
        "{err}"
    );

    secrets
        .delete_secret()
        .secret_id(&name)
        .force_delete_without_recovery(true)
        .send()
        .await
        .ctx("DeleteSecret")?;
    Ok(())
}

#[tokio::test]
async fn cloudformation_exports_and_outputs() -> Result<()> {
    let emulator = Emulator::shared().await;
    let cfn = aws_sdk_cloudformation::Client::new(&emulator.sdk_config().await);
    let lookups = lookups().await;

    let stack = unique_name("lookups-stack");
    let export_name = format!("{stack}-param");
    // Quirk (see emulator_smoke.rs): the parameter needs a Name in fakecloud.
    let template = json!({
        "Resources": {
            "Param": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Name": format!("/{stack}"), "Type": "String", "Value": "v"}
            }
        },
        "Outputs": {
            "ParamName": {"Value": {"Ref": "Param"}, "Export": {"Name": export_name}},
            "Plain": {"Value": "just-an-output"}
        }
    });
    cfn.create_stack()
        .stack_name(&stack)
        .template_body(template.to_string())
        .send()
        .await
        .ctx("CreateStack")?;
    created(&cfn, &stack).await?;

    assert_eq!(
        lookups.cloudformation_export(&export_name).await?,
        Some(json!(format!("/{stack}")))
    );
    assert_eq!(
        lookups
            .cloudformation_export(&unique_name("missing-export"))
            .await?,
        None
    );

    let output = |stack: &str, output: &str| StackOutputRef {
        stack_name: stack.to_string(),
        output_name: output.to_string(),
        region: None,
        role_arn: None,
    };
    assert_eq!(
        lookups
            .cloudformation_output(&output(&stack, "Plain"))
            .await?,
        Some(json!("just-an-output"))
    );
    assert_eq!(
        lookups
            .cloudformation_output(&output(&stack, "ParamName"))
            .await?,
        Some(json!(format!("/{stack}")))
    );
    // The configured region, named explicitly, is the same stack.
    let mut same_region = output(&stack, "Plain");
    same_region.region = Some("us-east-1".into());
    assert_eq!(
        lookups.cloudformation_output(&same_region).await?,
        Some(json!("just-an-output"))
    );
    assert_eq!(
        lookups
            .cloudformation_output(&output(&stack, "NoSuchOutput"))
            .await?,
        None
    );
    assert_eq!(
        lookups
            .cloudformation_output(&output(&unique_name("missing-stack"), "Plain"))
            .await?,
        None
    );
    cfn.delete_stack()
        .stack_name(&stack)
        .send()
        .await
        .ctx("DeleteStack")?;
    Ok(())
}

/// `Fn::GetStackOutput` with a `RoleArn`: the output of a CloudFormation stack of another
/// account is read as that role (STS `AssumeRole`); without the role, the caller's
/// account has no such stack; a role the caller may not take is refused in words.
#[tokio::test]
async fn cloudformation_outputs_of_another_account_through_a_role() -> Result<()> {
    let emulator = Emulator::shared().await;
    let (caller, other) = (stackflow_tests::emulator::ACCOUNT_ID, "222222222222");
    let stack = unique_name("lookups-other");
    let there = emulator.other_account(other, &stack).await;
    let role = format!("{stack}-reader");
    stackflow_tests::iam::role_trusting(&there, &role, caller).await;
    let cfn = aws_sdk_cloudformation::Client::new(&there);
    let template = json!({
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"Plain": {"Value": format!("{stack}-there")}}
    });
    cfn.create_stack()
        .stack_name(&stack)
        .template_body(template.to_string())
        .send()
        .await
        .ctx("CreateStack in the other account")?;
    created(&cfn, &stack).await?;
    let lookups = lookups().await;
    let output = |role: Option<String>| StackOutputRef {
        stack_name: stack.clone(),
        output_name: "Plain".to_string(),
        region: Some("us-east-1".to_string()),
        role_arn: role,
    };
    let arn = |name: &str| format!("arn:aws:iam::{other}:role/{name}");
    assert_eq!(
        lookups
            .cloudformation_output(&output(Some(arn(&role))))
            .await?,
        Some(json!(format!("{stack}-there")))
    );
    assert_eq!(lookups.cloudformation_output(&output(None)).await?, None);
    let stranger = format!("{stack}-nobody");
    let refused = lookups
        .cloudformation_output(&output(Some(arn(&stranger))))
        .await
        .expect_err("a role that cannot be taken");
    assert!(
        refused.to_string().contains(&format!(
            "(as {}): dispatch failure: an error occurred while loading credentials: ",
            arn(&stranger)
        )) && !refused.to_string().contains("DispatchFailure"),
        "{refused}"
    );
    cfn.delete_stack()
        .stack_name(&stack)
        .send()
        .await
        .ctx("DeleteStack")?;
    Ok(())
}
