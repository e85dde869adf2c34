//! Reviewing before acting, through the CLI against the emulator (issue 27 item 3):
//! - `diff --out FILE` saves a plan (never a NoEcho value) and `deploy FILE` applies
//!   exactly it; a plan whose records, template or file moved since is refused, exit 4,
//!   naming what moved, and AWS is left as it was;
//! - a change that widens access waits for a yes on a terminal (a pseudo-terminal made
//!   by `script`), and is refused without one; nothing is made before the yes;
//! - `destroy`, `drift --revert`, `import --migrate-from-cloudformation` and `engine
//!   destroy` ask too, and `--force`/`--yes` answer.

use std::ffi::OsStr;
use std::io::Write as _;
use std::process::{Command, Stdio};

use stackflow_tests::drift_cli::{Session, root};
use stackflow_tests::{Emulator, unique_name};

const REFUSED: i32 = 4;

fn session(emu: &Emulator, name: &str) -> Session {
    let dir = root(env!("CARGO_TARGET_TMPDIR"), "review");
    Session::new(emu, &dir, name)
}

/// `args` run as a user without `--yes` and without a terminal.
fn unconfirmed(s: &Session, args: &[&str]) -> (Option<i32>, String) {
    let out = s
        .cli
        .command(args)
        .env_remove("STACKFLOW_YES")
        .output()
        .expect("stackflow runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn quote(a: &OsStr) -> String {
    format!("'{}'", a.to_string_lossy().replace('\'', r"'\''"))
}

/// `args` run on a terminal (`script` gives it a pseudo-terminal), without `--yes`,
/// with `answer` typed: its exit code and what the terminal showed.
fn on_terminal(s: &Session, args: &[&str], answer: &str) -> (Option<i32>, String) {
    let inner = s.cli.command(args);
    let line: Vec<String> = std::iter::once(inner.get_program())
        .chain(inner.get_args())
        .map(quote)
        .collect();
    let mut c = Command::new("script");
    c.args(["-qec", &line.join(" "), "/dev/null"]).env_clear();
    for (k, v) in inner.get_envs() {
        if let (Some(v), false) = (v, k == "STACKFLOW_YES") {
            c.env(k, v);
        }
    }
    if let Some(dir) = inner.get_current_dir() {
        c.current_dir(dir);
    }
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(answer.as_bytes())
        .expect("the answer is typed");
    let out = child.wait_with_output().expect("script ends");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn topic_template(topic: &str, parameter: &str) -> String {
    format!(
        r#"
Parameters:
  Secret: {{ Type: String, NoEcho: true }}
  Label: {{ Type: String, Default: one }}
Resources:
  Topic:
    Type: AWS::SNS::Topic
    Properties:
      TopicName: {topic}
      DisplayName: !Ref Label
  Param:
    Type: AWS::SSM::Parameter
    Properties:
      Name: {parameter}
      Type: String
      Value: !Ref Secret
"#
    )
}

async fn display_name(sns: &aws_sdk_sns::Client, account_arn: &str) -> String {
    let attrs = sns
        .get_topic_attributes()
        .topic_arn(account_arn)
        .send()
        .await
        .expect("GetTopicAttributes");
    attrs
        .attributes()
        .and_then(|a| a.get("DisplayName"))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_saved_plan_is_applied_exactly_and_a_plan_that_moved_is_refused() {
    let emu = Emulator::shared().await;
    let s = session(emu, "saved");
    let stack = unique_name("plan");
    let topic = unique_name("reviewed");
    let parameter = format!("/{}/secret", unique_name("p"));
    let file = s.template("t", &stack, &topic_template(&topic, &parameter));
    let secret = format!("S3cr3t-{}", unique_name("v"));
    let secret_arg = format!("Secret={secret}");
    let plan = |name: &str| s.dir().join(name).display().to_string();

    // Saved, and applied exactly: the NoEcho value is given again, never saved.
    let one = plan("one.json");
    s.run(
        &["diff", &file, "--parameter", &secret_arg, "--out", &one],
        0,
    );
    let text = std::fs::read_to_string(&one).expect("the plan is saved");
    assert!(text.contains("\"stackflowPlan\": 1"), "{text}");
    assert!(!text.contains(&secret), "a NoEcho value was saved:\n{text}");
    s.run(&["deploy", &one, "--parameter", &secret_arg], 0);
    let sns = aws_sdk_sns::Client::new(&emu.sdk_config().await);
    let arn = s.state(&stack)["resources"]["Topic"]["physicalId"]
        .as_str()
        .expect("the topic's ARN is recorded")
        .to_string();
    assert_eq!(display_name(&sns, &arn).await, "one");
    // Applied once: the same plan again is stale (the records moved).
    let (code, err) = unconfirmed(&s, &["deploy", &one, "--parameter", &secret_arg]);
    assert_eq!(code, Some(REFUSED), "{err}");
    assert!(
        err.contains("Topic: the reviewed plan would create it, now it would no-op it"),
        "{err}"
    );

    // The records move between the review and the deploy: refused, naming what moved.
    let two = plan("two.json");
    s.run(
        &[
            "diff",
            &file,
            "--parameter",
            &secret_arg,
            "--parameter",
            "Label=two",
            "--out",
            &two,
        ],
        0,
    );
    s.run(
        &[
            "deploy",
            &file,
            "--parameter",
            &secret_arg,
            "--parameter",
            "Label=three",
        ],
        0,
    );
    let (code, err) = unconfirmed(&s, &["deploy", &two, "--parameter", &secret_arg]);
    assert_eq!(code, Some(REFUSED), "{err}");
    assert!(err.contains("moved since the plan was reviewed"), "{err}");
    assert!(
        err.contains("Topic: its changes differ at DisplayName"),
        "{err}"
    );
    assert!(!err.contains(&secret), "{err}");
    assert_eq!(
        display_name(&sns, &arn).await,
        "three",
        "the stale plan changed AWS"
    );

    // The template moves: refused.
    let four = plan("four.json");
    s.run(
        &[
            "diff",
            &file,
            "--parameter",
            &secret_arg,
            "--parameter",
            "Label=four",
            "--out",
            &four,
        ],
        0,
    );
    let edited = topic_template(&topic, &parameter).replace("Default: one", "Default: uno");
    std::fs::write(&file, edited).expect("template edited");
    let (code, err) = unconfirmed(&s, &["deploy", &four, "--parameter", &secret_arg]);
    assert_eq!(code, Some(REFUSED), "{err}");
    assert!(
        err.contains("the template changed since the plan was made"),
        "{err}"
    );

    // The plan file is edited: refused.
    s.run(
        &[
            "diff",
            &file,
            "--parameter",
            &secret_arg,
            "--parameter",
            "Label=five",
            "--out",
            &four,
        ],
        0,
    );
    let text = std::fs::read_to_string(&four).expect("plan");
    std::fs::write(&four, text.replace("\"five\"", "\"six\"")).expect("plan edited");
    let (code, err) = unconfirmed(&s, &["deploy", &four, "--parameter", &secret_arg]);
    assert_eq!(code, Some(REFUSED), "{err}");
    assert!(err.contains("was edited after it was saved"), "{err}");
    assert_eq!(display_name(&sns, &arn).await, "three");

    s.run(&["destroy", "--stack", &stack, "--force"], 0);
}

fn role_template(role: &str) -> String {
    format!(
        r#"
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      RoleName: {role}
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: {{ Service: lambda.amazonaws.com }}
            Action: sts:AssumeRole
"#
    )
}

async fn role_exists(iam: &aws_sdk_iam::Client, role: &str) -> bool {
    iam.get_role().role_name(role).send().await.is_ok()
}

#[tokio::test]
async fn a_change_that_widens_access_waits_for_a_yes_and_destroy_asks_too() {
    let emu = Emulator::shared().await;
    let s = session(emu, "approve");
    let stack = unique_name("iam");
    let role = unique_name("approved");
    let file = s.template("t", &stack, &role_template(&role));
    let iam = aws_sdk_iam::Client::new(&emu.sdk_config().await);

    // No terminal: refused before anything is made.
    let (code, err) = unconfirmed(&s, &["deploy", &file]);
    assert_eq!(code, Some(REFUSED), "{err}");
    assert!(err.contains("these changes widen access"), "{err}");
    assert!(
        err.contains("+ Role (AWS::IAM::Role, create) AssumeRolePolicyDocument:"),
        "{err}"
    );
    assert!(err.contains("there is no terminal to ask on"), "{err}");
    assert!(!role_exists(&iam, &role).await, "made before approval");

    // A terminal, and a no.
    let (code, shown) = on_terminal(&s, &["deploy", &file], "n\n");
    assert_eq!(code, Some(REFUSED), "{shown}");
    assert!(
        shown.contains(&format!("Deploy stack {stack} with these changes? [y/N]")),
        "{shown}"
    );
    assert!(shown.contains("not confirmed: nothing was done"), "{shown}");
    assert!(!role_exists(&iam, &role).await, "made after a no");

    // A terminal, and a yes.
    let (code, shown) = on_terminal(&s, &["deploy", &file], "y\n");
    assert_eq!(code, Some(0), "{shown}");
    assert!(role_exists(&iam, &role).await, "not made after a yes");

    // Nothing widens now: no question, no terminal needed.
    let (code, err) = unconfirmed(&s, &["deploy", &file]);
    assert_eq!(code, Some(0), "{err}");

    // Every other command that deletes or overwrites asks too.
    let asks: [&[&str]; 3] = [
        &["drift", "--stack", &stack, "--revert"],
        &[
            "import",
            &file,
            "--stack",
            &stack,
            "--migrate-from-cloudformation",
            "gone",
        ],
        &["engine", "destroy", "--name", "nothing-here"],
    ];
    for args in asks {
        let (code, err) = unconfirmed(&s, args);
        assert_eq!(code, Some(REFUSED), "{args:?}: {err}");
        assert!(
            err.contains("there is no terminal to ask on"),
            "{args:?}: {err}"
        );
    }
    let (code, err) = unconfirmed(&s, &["drift", "--stack", &stack, "--revert", "--dry-run"]);
    assert_eq!(code, Some(0), "a dry run asks nothing: {err}");

    // Destroy asks; --force answers.
    let (code, err) = unconfirmed(&s, &["destroy", "--stack", &stack]);
    assert_eq!(code, Some(REFUSED), "{err}");
    assert!(
        err.contains("pass --force (or --yes) to destroy it"),
        "{err}"
    );
    assert!(
        role_exists(&iam, &role).await,
        "deleted without a confirmation"
    );
    let (code, shown) = on_terminal(&s, &["destroy", "--stack", &stack], "y\n");
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.contains("delete the 1 resource(s) it made"),
        "{shown}"
    );
    assert!(!role_exists(&iam, &role).await, "not deleted after a yes");

    // --require-approval never: no question.
    let (code, err) = unconfirmed(&s, &["deploy", &file, "--require-approval", "never"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(role_exists(&iam, &role).await);
    let (code, err) = unconfirmed(&s, &["destroy", "--stack", &stack, "--force"]);
    assert_eq!(code, Some(0), "{err}");
}
