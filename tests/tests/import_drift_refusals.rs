//! `stackflow import` and `drift`, end to end through the CLI against the emulator
//! (issue 14): journal marks honoured by a later rollback; secret references kept as
//! references (never plaintext in the log or state); a masked position not compared
//! (exit 2); both refusal causes, their warning and how each clears.

use serde_json::Value;
use stackflow_tests::drift_cli::{Session, root};
use stackflow_tests::secret_scan::Scanner;
use stackflow_tests::{Emulator, unique_name};

fn session(emu: &Emulator, name: &str) -> Session {
    let dir = root(env!("CARGO_TARGET_TMPDIR"), "import_drift_refusals");
    Session::new(emu, &dir, name)
}

fn param(name: &str, value: &str, extra: &str) -> String {
    format!(
        "  {name}:\n    Type: AWS::SSM::Parameter\n{extra}    Properties:\n      Name: /{{P}}/{name}\n      Type: String\n      Value: {value}\n"
    )
}

#[tokio::test]
async fn a_rollback_after_an_import_leaves_the_adopted_resources() {
    let emu = Emulator::shared().await;
    let ssm = aws_sdk_ssm::Client::new(&emu.sdk_config().await);
    let s = session(emu, "journal");
    let stack = unique_name("journal");
    let bad = "  Bad:\n    Type: AWS::SSM::Parameter\n    DependsOn: [A, C, D]\n    Properties:\n      Name: /{P}/Bad\n      Type: NoSuchType\n      Value: x\n";
    let body = format!(
        "Resources:\n{}{}{}{bad}",
        param("A", "a", ""),
        param("C", "c", ""),
        param("D", "d", "")
    )
    .replace("{P}", &stack);
    let path = s.template("v1", &stack, &body);
    s.run(&["deploy", &path, "--no-rollback"], 1);
    let other = format!("/{stack}/other");
    let put = ssm
        .put_parameter()
        .name(&other)
        .value("o")
        .r#type("String".into());
    put.send().await.expect("PutParameter");

    let c = format!("C=/{stack}/C");
    let a = format!("A={other}");
    let run = s.run(
        &[
            "import",
            &path,
            "--stack",
            &stack,
            "--resource",
            &c,
            "--resource",
            &a,
            // A is recorded under the failed deploy's id: replacing it needs --force.
            "--force",
        ],
        0,
    );
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("warning") && said.contains(&format!("/{stack}/A")),
        "{said}"
    );
    s.run(&["rollback", "--stack", &stack], 0);
    let exists = |name: String| {
        let ssm = ssm.clone();
        async move { ssm.get_parameter().name(name).send().await.is_ok() }
    };
    assert!(
        exists(format!("/{stack}/C")).await,
        "the adopted C was rolled back"
    );
    assert!(exists(other.clone()).await, "the adopted A was rolled back");
    assert!(
        exists(format!("/{stack}/A")).await,
        "A's journal entry was not skipped"
    );
    assert!(
        !exists(format!("/{stack}/D")).await,
        "D, not adopted, was not rolled back"
    );
}

/// A Lambda function whose environment holds two secret references and one embedded in
/// text.
fn secret_template(stack: &str, secure: &str, sm: &str) -> String {
    format!(
        r#"
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      RoleName: {stack}-role
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: {{Service: lambda.amazonaws.com}}
            Action: sts:AssumeRole
  Fn:
    Type: AWS::Lambda::Function
    Properties:
      FunctionName: {stack}-fn
      Runtime: nodejs20.x
      Handler: index.handler
      Role: !GetAtt Role.Arn
      Code: {{ZipFile: "exports.handler = async () => 1;"}}
      Environment:
        Variables:
          A: "{{{{resolve:ssm-secure:{secure}}}}}"
          B: "{{{{resolve:secretsmanager:{sm}}}}}"
          C: "pre-{{{{resolve:secretsmanager:{sm}}}}}"
"#
    )
}

/// Neither the event log nor the state holds `secrets` in any form.
fn assert_clean(s: &Session, stack: &str, secrets: &[(&str, &str)]) {
    let mut scanner = Scanner::new(secrets.iter().copied());
    scanner.scan("events --json", s.events_text(stack).as_bytes());
    scanner.scan("state show --json", s.state(stack).to_string().as_bytes());
    assert!(scanner.hits().is_empty(), "{}", scanner.report());
}

fn baseline_env(s: &Session, stack: &str) -> Value {
    let state = s.state(stack);
    state["resources"]["Fn"]["baseline"]["observed"]["Environment"]["Variables"].clone()
}

#[tokio::test]
async fn secret_references_stay_references_and_a_mask_is_not_compared() {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let stack = unique_name("secrets");
    let (secure, sm) = (format!("/{stack}/secure"), format!("{stack}-sm"));
    let (plain_a, plain_b) = (format!("ssm-{stack}-plain"), format!("sm-{stack}-plain"));
    let ssm = aws_sdk_ssm::Client::new(&config);
    let put = ssm.put_parameter().name(&secure).value(&plain_a);
    put.r#type("SecureString".into())
        .send()
        .await
        .expect("PutParameter");
    let smc = aws_sdk_secretsmanager::Client::new(&config);
    let create = smc.create_secret().name(&sm).secret_string(&plain_b);
    create.send().await.expect("CreateSecret");
    let secrets = [
        ("ssm-secure", plain_a.as_str()),
        ("secretsmanager", plain_b.as_str()),
    ];
    let body = secret_template(&stack, &secure, &sm);

    let deployer = session(emu, "secrets-deploy");
    let path = deployer.template("v1", &stack, &body);
    deployer.run(&["deploy", &path], 0);
    assert_clean(&deployer, &stack, &secrets);
    let env = baseline_env(&deployer, &stack);
    assert_eq!(env["A"], format!("{{{{resolve:ssm-secure:{secure}}}}}"));
    assert_eq!(env["C"], format!("pre-{{{{resolve:secretsmanager:{sm}}}}}"));
    deployer.drift(&stack, &[], 0);

    let s = session(emu, "secrets-import");
    let path = s.template("v1", &stack, &body);
    s.json(&["import", &path, "--stack", &stack], 0);
    assert_clean(&s, &stack, &secrets);
    assert_eq!(
        baseline_env(&s, &stack)["B"],
        format!("{{{{resolve:secretsmanager:{sm}}}}}")
    );
    s.drift(&stack, &[], 0);

    // Out of band, C no longer fits its template text: an import cannot place the
    // reference there, and masks it.
    let lambda = aws_sdk_lambda::Client::new(&config);
    let vars = [
        ("A", &plain_a),
        ("B", &plain_b),
        ("C", &format!("post-{plain_b}")),
    ];
    let env = aws_sdk_lambda::types::Environment::builder()
        .set_variables(Some(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ))
        .build();
    let update = lambda
        .update_function_configuration()
        .function_name(format!("{stack}-fn"));
    update
        .environment(env)
        .send()
        .await
        .expect("UpdateFunctionConfiguration");
    s.json(&["import", &path, "--stack", &stack, "--force"], 0);
    assert_clean(&s, &stack, &secrets);
    assert_eq!(baseline_env(&s, &stack)["C"], "***");
    // AWS unchanged since: the mask is the only difference, not compared, exit 2.
    let drift = s.drift(&stack, &["--resource", "Fn"], 2);
    assert_eq!(drift.status("Fn"), "not-compared", "{:#}", drift.0);
    let not_compared = drift.row("Fn")["notCompared"].to_string();
    assert!(
        not_compared.contains("/Environment/Variables/C"),
        "{not_compared}"
    );
    assert_clean(&s, &stack, &secrets);
}

/// PV's value is a parameter; PI's takes an `Fn::If` branch, and the untaken one holds a
/// reference. `desc` and `pv` vary between deploys (an in-place update, a replacement).
fn refusal_template(stack: &str, desc: &str, pv: &str) -> String {
    format!(
        r#"
Parameters:
  Val:
    Type: String
    Default: dflt
  Flag:
    Type: String
    Default: "no"
Conditions:
  On: !Equals [!Ref Flag, "yes"]
Resources:
  PV:
    Type: AWS::SSM::Parameter
    Properties:
      Name: /{stack}/{pv}
      Type: String
      Value: !Ref Val
      Description: {desc}
  PI:
    Type: AWS::SSM::Parameter
    Properties:
      Name: /{stack}/pi
      Type: String
      Value: !If [On, "{{{{resolve:ssm:/{stack}/source}}}}", plain]
      Description: {desc}
"#
    )
}

/// The `ObservedBaseline` line of resource `id` in `state show`.
fn baseline_line(s: &Session, stack: &str, id: &str) -> String {
    let text = s.state_text(stack);
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(&format!("{id} (")));
    lines.next();
    lines.next().unwrap_or_default().trim().to_string()
}

#[tokio::test]
async fn refusals_their_warning_and_how_each_clears() {
    let emu = Emulator::shared().await;
    let config = emu.sdk_config().await;
    let stack = unique_name("refusal");
    let deployed_value = format!("deployed-{stack}-value");
    // The emulator's CloudFormation makes PV with a non-default Val; PI is made directly.
    let cfn = aws_sdk_cloudformation::Client::new(&config);
    let only_pv = refusal_template(&stack, "d1", "pv").replace("  PI:", "  PIx:");
    let only_pv = only_pv
        .split("  PIx:")
        .next()
        .expect("PV's part")
        .to_string();
    let val = aws_sdk_cloudformation::types::Parameter::builder()
        .parameter_key("Val")
        .parameter_value(&deployed_value)
        .build();
    let create = cfn.create_stack().stack_name(&stack).template_body(only_pv);
    create.parameters(val).send().await.expect("CreateStack");
    let ssm = aws_sdk_ssm::Client::new(&config);
    let put = ssm
        .put_parameter()
        .name(format!("/{stack}/pi"))
        .value("plain");
    put.r#type("String".into())
        .send()
        .await
        .expect("PutParameter");
    let pv_name = format!("/{stack}/pv");
    let got = ssm
        .get_parameter()
        .name(&pv_name)
        .send()
        .await
        .expect("the stack made PV");
    assert_eq!(
        got.parameter.and_then(|p| p.value),
        Some(deployed_value.clone())
    );

    let s = session(emu, "refusal");
    let path = s.template("v1", &stack, &refusal_template(&stack, "d1", "pv"));
    let run = s.run(&["import", &path, "--stack", &stack], 0);
    assert!(
        run.stderr.contains("warning") && run.stderr.contains("Val"),
        "{}",
        run.describe()
    );
    assert!(
        !run.stderr.contains(&deployed_value),
        "the warning shows the value"
    );
    let secrets = [("deployed parameter value", deployed_value.as_str())];
    assert_clean(&s, &stack, &secrets);
    let refused = |cause: &str| format!("ObservedBaseline: REFUSED ({cause})");
    assert_eq!(
        baseline_line(&s, &stack, "PV"),
        refused("unverifiable-parameter")
    );
    assert_eq!(
        baseline_line(&s, &stack, "PI"),
        refused("incomplete-resolution")
    );

    // A refused baseline is declined by --accept: exit 2.
    let put = ssm
        .put_parameter()
        .name(format!("/{stack}/pi"))
        .value("changed");
    put.overwrite(true).send().await.expect("PutParameter");
    let declined = s.drift(&stack, &["--resource", "PI", "--accept"], 2);
    assert_eq!(declined.status("PI"), "declined", "{:#}", declined.0);

    // An in-place update clears incomplete-resolution only.
    let path = s.template("v2", &stack, &refusal_template(&stack, "d2", "pv"));
    s.run(&["deploy", &path], 0);
    assert_eq!(
        baseline_line(&s, &stack, "PV"),
        refused("unverifiable-parameter")
    );
    assert!(baseline_line(&s, &stack, "PI").ends_with("properties"));
    // A replacement clears unverifiable-parameter.
    let path = s.template("v3", &stack, &refusal_template(&stack, "d2", "pv2"));
    s.run(&["deploy", &path], 0);
    assert!(baseline_line(&s, &stack, "PV").ends_with("properties"));
    assert!(baseline_line(&s, &stack, "PI").ends_with("properties"));
    assert_clean(&s, &stack, &secrets);
    s.drift(&stack, &[], 0);
}
