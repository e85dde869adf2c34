//! No secret is written anywhere: stacks that carry secrets are deployed against the
//! emulator through the `stackflow` binary (the embedded engine on a local store, and
//! Step Functions executions run by `stackflow worker` on a DynamoDB store), then every
//! byte those runs wrote is searched for the plaintexts, raw, JSON-escaped and in base64
//! (see `stackflow_tests::secret_scan`): the store's files or table items, what the store
//! reads back, every S3 object, the executions' histories, and every run's stdout and
//! stderr (text and `--json`, with `-vv`; the CLI installs no log subscriber, so its
//! stderr is its whole log, and `RUST_LOG=trace` is set in case it ever does). Zero hits
//! is the only pass.
//!
//! The secrets come from each kind of source: a Secrets Manager secret (a plain string,
//! and a key of a JSON one), an SSM `SecureString` (`ssm-secure`), and `NoEcho`
//! parameters; they reach AWS directly, as the value of a Secrets Manager secret the
//! stack makes (its SDK provider), in tags, inside a JSON document built by
//! `Fn::Sub`, inside a longer string, through `Fn::GetAtt` of a masked attribute, and
//! through `Fn::Base64`, `Fn::Sub`, `Fn::Join` and `Fn::Select`/`Fn::Split`; and in
//! outputs. A failing call whose error quotes the value it was sent (SSM's
//! `AllowedPattern` check) is rolled back, by `stackflow rollback` and by the deploy
//! itself. Positive controls read the values back from the emulator, so the test cannot
//! pass by sending nothing.
//!
//! Not here: a custom resource that answers `NoEcho: true` (Lambda does not run on the
//! emulator; `shared/engine/tests/secrets.rs` covers it in-process).
//!
//! A run's outputs stay under `target/tmp/secret-scan/` for reading after a failure.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use aws_sdk_ssm::types::{ParameterType, ResourceTypeForTagging};
use serde_json::{Value, json};
use stackflow_events::dynamo::DynamoStore;
use stackflow_events::sqlite::SqliteStore;
use stackflow_tests::cli::{Cli, Run};
use stackflow_tests::secret_scan::{Scanner, base64, plaintext};
use stackflow_tests::{Emulator, unique_name};

const ROLE: &str = "arn:aws:iam::123456789012:role/stackflow-engine";
/// An `AllowedPattern` no secret here matches: SSM's error then quotes the value.
const DIGITS_ONLY: &str = "^[0-9]+$";

/// The plaintexts of one test.
struct Secrets {
    sm_plain: String,
    /// The `password` of the JSON secret.
    sm_json: String,
    ssm_secure: String,
    pw: String,
    /// A `NoEcho` value with characters JSON escapes.
    quoted: String,
    /// The element of the `NoEcho` list `Csv` that `Fn::Select` picks.
    csv_item: String,
}

impl Secrets {
    fn new() -> Secrets {
        Secrets {
            sm_plain: plaintext("sm-plain"),
            sm_json: plaintext("sm-json"),
            ssm_secure: plaintext("ssm-secure"),
            pw: plaintext("noecho-pw"),
            quoted: format!("{}\"and\\back", plaintext("noecho-quoted")),
            csv_item: plaintext("noecho-csv"),
        }
    }

    fn csv(&self) -> String {
        format!("first,{},last", self.csv_item)
    }

    fn scanner(&self) -> Scanner {
        let csv = self.csv();
        Scanner::new([
            ("secretsmanager-plain", self.sm_plain.as_str()),
            ("secretsmanager-json-password", self.sm_json.as_str()),
            ("ssm-securestring", self.ssm_secure.as_str()),
            ("noecho-Pw", self.pw.as_str()),
            ("noecho-Quoted", self.quoted.as_str()),
            ("noecho-Csv", csv.as_str()),
            ("noecho-Csv-item", self.csv_item.as_str()),
        ])
    }

    /// `text` with every plaintext replaced by its label.
    fn redact(&self, text: &str) -> String {
        self.scanner().redacted(text)
    }

    /// `--parameter` arguments for the `NoEcho` parameters of `names`.
    fn parameters(&self, names: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        for name in names {
            let value = match *name {
                "Pw" => self.pw.clone(),
                "Quoted" => self.quoted.clone(),
                _ => self.csv(),
            };
            out.push("--parameter".to_string());
            out.push(format!("{name}={value}"));
        }
        out
    }
}

/// The secrets the dynamic references read, made in the emulator before any deploy, and
/// the prefix of every SSM parameter the test's stacks make.
struct Sources {
    sm_plain: String,
    sm_json: String,
    ssm_secure: String,
    prefix: String,
}

impl Sources {
    async fn create(emu: &Emulator, s: &Secrets) -> Sources {
        let config = emu.sdk_config().await;
        let sm = aws_sdk_secretsmanager::Client::new(&config);
        let ssm = aws_sdk_ssm::Client::new(&config);
        let src = Sources {
            sm_plain: unique_name("scan-plain"),
            sm_json: unique_name("scan-json"),
            ssm_secure: format!("/{}/secure", unique_name("scan")),
            prefix: format!("/{}", unique_name("scan")),
        };
        let json_secret = json!({"username": "admin", "password": s.sm_json}).to_string();
        for (name, value) in [(&src.sm_plain, &s.sm_plain), (&src.sm_json, &json_secret)] {
            sm.create_secret()
                .name(name)
                .secret_string(value)
                .send()
                .await
                .expect("CreateSecret");
        }
        ssm.put_parameter()
            .name(&src.ssm_secure)
            .r#type(ParameterType::SecureString)
            .value(&s.ssm_secure)
            .send()
            .await
            .expect("PutParameter SecureString");
        src
    }

    fn sm_plain_ref(&self) -> String {
        format!("{{{{resolve:secretsmanager:{}}}}}", self.sm_plain)
    }

    fn sm_json_ref(&self) -> String {
        format!(
            "{{{{resolve:secretsmanager:{}:SecretString:password}}}}",
            self.sm_json
        )
    }

    fn ssm_secure_ref(&self) -> String {
        format!("{{{{resolve:ssm-secure:{}}}}}", self.ssm_secure)
    }

    /// The name of a parameter a stack makes.
    fn name(&self, stack: &str, leaf: &str) -> String {
        format!("{}/{stack}/{leaf}", self.prefix)
    }
}

/// An `AWS::SSM::Parameter` with this name and value.
fn param(name: String, value: Value) -> Value {
    json!({"Type": "AWS::SSM::Parameter", "Properties": {"Name": name, "Type": "String", "Value": value}})
}

/// A parameter whose value SSM refuses, quoting it in its error.
fn refused(name: String, value: Value, after: &[&str]) -> Value {
    let mut p = param(name, value);
    p["Properties"]["AllowedPattern"] = json!(DIGITS_ONLY);
    p["DependsOn"] = json!(after);
    p
}

/// An `AWS::SecretsManager::Secret` named after `name` (without its leading `/`) whose
/// `SecretString` is `value`.
fn secret(name: String, value: Value) -> Value {
    let name = name.trim_start_matches('/');
    json!({
        "Type": "AWS::SecretsManager::Secret",
        "Properties": {"Name": name, "Description": "a copy", "SecretString": value}
    })
}

fn no_echo() -> Value {
    json!({"Type": "String", "NoEcho": true})
}

/// Every kind of source, used every way (scenarios 1 and 2); its parameters are named
/// after `stack`.
fn secrets_template(src: &Sources, stack: &str) -> Value {
    let n = |leaf: &str| src.name(stack, leaf);
    let nested = format!(
        "{{\"db\":{{\"password\":\"{}\",\"region\":\"${{AWS::Region}}\"}}}}",
        src.ssm_secure_ref()
    );
    let mut tagged = param(n("tagged"), json!("not-a-secret"));
    tagged["Properties"]["Tags"] = json!({"owner": "tests", "secret": src.sm_json_ref()});
    json!({
        "Parameters": {"Pw": no_echo(), "Quoted": no_echo(), "Csv": no_echo()},
        "Resources": {
            "SmPlain": param(n("sm-plain"), json!(src.sm_plain_ref())),
            "SmJson": param(n("sm-json"), json!(src.sm_json_ref())),
            "SsmSecure": param(n("ssm-secure"), json!(src.ssm_secure_ref())),
            "Embedded": param(n("embedded"), json!(format!("prefix-{}-suffix", src.sm_plain_ref()))),
            "NestedJson": param(n("nested-json"), json!({"Fn::Sub": nested})),
            "Tagged": tagged,
            "SmCopy": secret(n("sm-copy"), json!(src.sm_json_ref())),
            "FromAttr": param(n("from-attr"), json!({"Fn::GetAtt": ["SsmSecure", "Value"]})),
            "NoEcho": param(n("noecho"), json!({"Ref": "Pw"})),
            "NoEchoBase64": param(n("noecho-b64"), json!({"Fn::Base64": {"Fn::Sub": "pw:${Pw}"}})),
            "NoEchoSub": param(n("noecho-sub"), json!({"Fn::Sub": "user:${Pw}@db"})),
            "NoEchoJoin": param(n("noecho-join"), json!({"Fn::Join": ["-", [{"Ref": "Quoted"}, "x"]]})),
            "NoEchoSelect": param(
                n("noecho-select"),
                json!({"Fn::Select": [1, {"Fn::Split": [",", {"Ref": "Csv"}]}]})
            ),
        },
        "Outputs": {
            "Pw": {"Value": {"Ref": "Pw"}},
            "PwSub": {"Value": {"Fn::Sub": "x-${Pw}"}},
            "FromSecret": {"Value": {"Fn::GetAtt": ["SmPlain", "Value"]}},
            "Embedded": {"Value": {"Fn::GetAtt": ["Embedded", "Value"]}},
        },
    })
}

/// Scenario 3: `v1` holds a `NoEcho`-derived value; `v2` updates it to a secret, adds
/// one, and has two calls that SSM refuses quoting a `NoEcho` value and a resolved
/// secret.
fn failing_template(src: &Sources, stack: &str, v2: bool) -> Value {
    let n = |leaf: &str| src.name(stack, leaf);
    let mut resources = json!({"Keep": param(n("keep"), json!({"Fn::Sub": "keep-${Pw}"}))});
    if v2 {
        resources["Keep"] = param(n("keep"), json!(src.sm_json_ref()));
        resources["Good"] = param(n("good"), json!(src.ssm_secure_ref()));
        let after = ["Keep", "Good"];
        resources["BadEcho"] = refused(n("bad-echo"), json!({"Ref": "Pw"}), &after);
        resources["BadDyn"] = refused(n("bad-dyn"), json!(src.sm_plain_ref()), &after);
    }
    json!({
        "Parameters": {"Pw": no_echo()},
        "Resources": resources,
        "Outputs": {"Keep": {"Value": {"Fn::GetAtt": ["Keep", "Value"]}}},
    })
}

fn write_json(dir: &Path, file: &str, v: &Value) -> String {
    let path = dir.join(file);
    std::fs::write(&path, serde_json::to_string_pretty(v).unwrap()).unwrap();
    path.display().to_string()
}

/// `fixed` then `extra`, as arguments.
fn args<'a>(fixed: &[&'a str], extra: &'a [String]) -> Vec<&'a str> {
    fixed
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
        .collect()
}

/// `run`, which must have exited with `code` (its output redacted in the message).
fn expect(s: &Secrets, run: Run, code: i32) -> Run {
    assert_eq!(run.code, Some(code), "{}", s.redact(&run.describe()));
    run
}

/// A directory of its own for one test, under the target directory.
fn test_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("secret-scan")
        .join(unique_name(name));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn get_param(ssm: &aws_sdk_ssm::Client, name: &str) -> Option<String> {
    let out = ssm
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
        .ok()?;
    out.parameter()?.value().map(str::to_string)
}

/// The parameter holds exactly `want` (the message never shows either value).
async fn assert_param(ssm: &aws_sdk_ssm::Client, name: &str, want: &str) {
    let got = get_param(ssm, name).await;
    assert!(
        got.as_deref() == Some(want),
        "positive control: {name} does not hold the value the template computes from its \
         secret (it holds {})",
        match got {
            None => "nothing",
            Some(_) => "another value",
        }
    );
}

/// Positive control of scenarios 1 and 2: every secret reached AWS as the template says.
async fn control_secrets_stack(ssm: &aws_sdk_ssm::Client, s: &Secrets, src: &Sources) {
    let n = |leaf: &str| src.name("a", leaf);
    assert_param(ssm, &n("sm-plain"), &s.sm_plain).await;
    assert_param(ssm, &n("sm-json"), &s.sm_json).await;
    assert_param(ssm, &n("ssm-secure"), &s.ssm_secure).await;
    assert_param(ssm, &n("from-attr"), &s.ssm_secure).await;
    assert_param(
        ssm,
        &n("embedded"),
        &format!("prefix-{}-suffix", s.sm_plain),
    )
    .await;
    assert_param(ssm, &n("noecho"), &s.pw).await;
    let b64 = base64(format!("pw:{}", s.pw).as_bytes());
    assert_param(ssm, &n("noecho-b64"), &b64).await;
    assert_param(ssm, &n("noecho-sub"), &format!("user:{}@db", s.pw)).await;
    assert_param(ssm, &n("noecho-join"), &format!("{}-x", s.quoted)).await;
    assert_param(ssm, &n("noecho-select"), &s.csv_item).await;
    let nested = get_param(ssm, &n("nested-json")).await.unwrap_or_default();
    let nested: Value = serde_json::from_str(&nested).unwrap_or_default();
    assert!(
        nested["db"]["password"].as_str() == Some(s.ssm_secure.as_str()),
        "positive control: the nested JSON document does not hold the SecureString"
    );
    let tags = ssm
        .list_tags_for_resource()
        .resource_type(ResourceTypeForTagging::Parameter)
        .resource_id(n("tagged"))
        .send()
        .await
        .expect("ListTagsForResource");
    assert!(
        tags.tag_list()
            .iter()
            .any(|t| t.key() == "secret" && t.value() == s.sm_json),
        "positive control: the tag does not hold the Secrets Manager JSON key"
    );
}

/// Positive control of the Secrets Manager secret of scenario 1: it holds the JSON key it
/// was given from another secret (the message never shows either value).
async fn control_secret_copy(s: &Secrets, src: &Sources) {
    let config = Emulator::shared().await.sdk_config().await;
    let sm = aws_sdk_secretsmanager::Client::new(&config);
    let name = src.name("a", "sm-copy");
    let got = sm
        .get_secret_value()
        .secret_id(name.trim_start_matches('/'))
        .send()
        .await;
    let got = got.ok().and_then(|g| g.secret_string().map(str::to_string));
    assert!(
        got.as_deref() == Some(s.sm_json.as_str()),
        "positive control: the secret {name} does not hold the JSON key of its source"
    );
}

/// `state show` and `events`, as text and as JSON; returns the `events --json` run.
fn show_everything(cli: &Cli, s: &Secrets, stack: &str) -> Run {
    expect(s, cli.run(&["state", "show", "--stack", stack, "-vv"]), 0);
    expect(
        s,
        cli.run(&["state", "show", "--stack", stack, "--json"]),
        0,
    );
    expect(s, cli.run(&["events", "--stack", stack, "-vv"]), 0);
    expect(s, cli.run(&["events", "--stack", stack, "--json"]), 0)
}

/// `diff` as text (`-vv`: every resource and output) and as JSON.
fn diff_both_ways(cli: &Cli, s: &Secrets, path: &str, stack: &str, params: &[String]) {
    expect(
        s,
        cli.run(&args(&["diff", path, "--stack", stack, "-vv"], params)),
        0,
    );
    let json = ["diff", path, "--stack", stack, "--json", "-vv"];
    expect(s, cli.run(&args(&json, params)), 0);
}

/// `scrub --dry-run --fail`: stackflow's own search of the log agrees that it is clean.
fn scrub_finds_nothing(cli: &Cli, s: &Secrets, path: &str, stack: &str, params: &[String]) {
    let fixed = ["scrub", path, "--stack", stack, "--dry-run", "--fail"];
    expect(s, cli.run(&args(&fixed, params)), 0);
    let fixed = [
        "scrub",
        path,
        "--stack",
        stack,
        "--dry-run",
        "--fail",
        "--json",
    ];
    expect(s, cli.run(&args(&fixed, params)), 0);
}

/// Scenarios 1 and 2 on the embedded engine: diff (before the store exists), deploy, the
/// positive control, a deploy that changes nothing, diff, state, events, scrub, destroy.
///
/// Returns a connection to the local store, opened after the first diff and kept open
/// until the scan: as long as one is open, SQLite keeps the write-ahead log and its
/// index (`events.db-wal`, `-shm`) instead of deleting them when each run exits, so
/// their bytes are scanned too.
async fn secrets_stack(
    cli: &Cli,
    ssm: &aws_sdk_ssm::Client,
    s: &Secrets,
    src: &Sources,
) -> SqliteStore {
    let stack = unique_name("ScanSecrets");
    let path = write_json(&cli.dir, "secrets.json", &secrets_template(src, "a"));
    let params = s.parameters(&["Pw", "Quoted", "Csv"]);
    diff_both_ways(cli, s, &path, &stack, &params);
    let held = SqliteStore::open(cli.dir.join("store").join("events.db")).unwrap();
    let deploy = ["deploy", path.as_str(), "--stack", &stack, "-vv"];
    expect(s, cli.run(&args(&deploy, &params)), 0);
    control_secrets_stack(ssm, s, src).await;
    control_secret_copy(s, src).await;
    // Its outputs file is in the directory the scan reads.
    let outputs = cli.dir.join("outputs.json").display().to_string();
    let again = [
        "deploy",
        path.as_str(),
        "--stack",
        &stack,
        "--json",
        "-vv",
        "--outputs-file",
        &outputs,
    ];
    let again = expect(s, cli.run(&args(&again, &params)), 0);
    assert!(std::path::Path::new(&outputs).is_file(), "no {outputs}");
    if !again.stdout.contains("\"no-changes\"") {
        println!(
            "note: the second deploy of {stack} was not a no-op:\n{}",
            s.redact(&again.stdout)
        );
    }
    diff_both_ways(cli, s, &path, &stack, &params);
    show_everything(cli, s, &stack);
    scrub_finds_nothing(cli, s, &path, &stack, &params);
    let destroy = ["destroy", "--stack", &stack, "--json", "-vv"];
    expect(s, cli.run(&destroy), 0);
    expect(s, cli.run(&["events", "--stack", &stack, "--json"]), 0);
    held
}

/// The emulator's error for a refused value quotes it: scenario 3 relies on that.
async fn assert_errors_echo(ssm: &aws_sdk_ssm::Client, src: &Sources) {
    let probe = plaintext("probe");
    let err = ssm
        .put_parameter()
        .name(src.name("probe", "p"))
        .r#type(ParameterType::String)
        .value(&probe)
        .allowed_pattern(DIGITS_ONLY)
        .send()
        .await
        .expect_err("SSM refuses a value that does not match AllowedPattern");
    let text = aws_smithy_types::error::display::DisplayErrorContext(&err).to_string();
    assert!(
        text.contains(&probe),
        "the emulator's AllowedPattern error does not quote the value: {text}"
    );
}

/// Some `ResourceFailed` of a refused resource was recorded, with SSM's (masked) message:
/// the echoed value went through stackflow's error handling.
fn assert_refusal_recorded(s: &Secrets, events: &Run) {
    let recorded = events.stdout.lines().any(|l| {
        l.contains("\"ResourceFailed\"")
            && (l.contains("BadEcho") || l.contains("BadDyn"))
            && l.contains("satisfy constraint")
    });
    assert!(
        recorded,
        "no ResourceFailed with SSM's refusal:\n{}",
        s.redact(&events.stdout)
    );
}

/// Scenario 3 on the embedded engine: a failed update kept (`--no-rollback`), the
/// positive control, `stackflow rollback`, then the same deploy rolled back by itself.
async fn failing_stack(cli: &Cli, ssm: &aws_sdk_ssm::Client, s: &Secrets, src: &Sources) {
    assert_errors_echo(ssm, src).await;
    let stack = unique_name("ScanFailing");
    let v1 = write_json(
        &cli.dir,
        "failing-v1.json",
        &failing_template(src, "b", false),
    );
    let v2 = write_json(
        &cli.dir,
        "failing-v2.json",
        &failing_template(src, "b", true),
    );
    let params = s.parameters(&["Pw"]);
    expect(
        s,
        cli.run(&args(&["deploy", &v1, "--stack", &stack], &params)),
        0,
    );
    let kept = [
        "deploy",
        v2.as_str(),
        "--stack",
        &stack,
        "--no-rollback",
        "-vv",
    ];
    expect(s, cli.run(&args(&kept, &params)), 1);
    assert_param(ssm, &src.name("b", "good"), &s.ssm_secure).await;
    assert_param(ssm, &src.name("b", "keep"), &s.sm_json).await;
    let events = show_everything(cli, s, &stack);
    assert_refusal_recorded(s, &events);
    // Keep's v1 value was computed from a NoEcho parameter, so it is recorded masked and
    // this rollback cannot restore it (it says so and exits 1); only what it writes
    // matters here.
    let rollback = cli.run(&["rollback", "--stack", &stack, "-vv"]);
    let restored = get_param(ssm, &src.name("b", "keep")).await;
    println!(
        "note: rollback exited {:?}; Keep {} its v1 value",
        rollback.code,
        if restored == Some(format!("keep-{}", s.pw)) {
            "holds"
        } else {
            "does not hold"
        }
    );
    let auto = ["deploy", v2.as_str(), "--stack", &stack, "--json", "-vv"];
    expect(s, cli.run(&args(&auto, &params)), 1);
    let events = show_everything(cli, s, &stack);
    assert_refusal_recorded(s, &events);
    scrub_finds_nothing(cli, s, &v2, &stack, &params);
    expect(s, cli.run(&["destroy", "--stack", &stack, "-vv"]), 0);
}

/// Looks at every object of every other bucket of the emulator (other tests' buckets,
/// which may vanish meanwhile, as far as they can be read); `done` were scanned already.
async fn scan_other_buckets(scanner: &mut Scanner, emu: &Emulator, done: &[&str]) -> usize {
    let s3 = emu.s3().await;
    let buckets = s3.list_buckets().send().await.expect("ListBuckets");
    let mut objects = 0;
    for b in buckets.buckets().iter().filter_map(|b| b.name()) {
        if !done.contains(&b) {
            objects += scanner.scan_bucket(&s3, b).await.unwrap_or(0);
        }
    }
    objects
}

/// Zero hits, or a failure that says where (never what).
fn assert_clean(scanner: &Scanner, what: &str, started: Instant) {
    let (places, bytes) = scanner.looked_at();
    println!(
        "{what}: looked at {places} places ({bytes} bytes) after {:.1}s: {} hits",
        started.elapsed().as_secs_f64(),
        scanner.hits().len()
    );
    assert!(
        scanner.hits().is_empty(),
        "{what}: plaintext written, {} times:\n{}",
        scanner.hits().len(),
        scanner.report()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_deploys_write_no_secret_anywhere() {
    let started = Instant::now();
    let emu = Emulator::shared().await;
    let s = Secrets::new();
    let src = Sources::create(emu, &s).await;
    let ssm = aws_sdk_ssm::Client::new(&emu.sdk_config().await);
    let dir = test_dir("embedded");
    let cli = Cli {
        store: format!("local:{}", dir.join("store").display()),
        dir,
        endpoint: emu.endpoint().to_string(),
        bucket: None,
        engine: None,
    };
    let store = secrets_stack(&cli, &ssm, &s, &src).await;
    failing_stack(&cli, &ssm, &s, &src).await;

    let mut scanner = s.scanner();
    let store_dir = cli.dir.join("store");
    let files: Vec<String> = std::fs::read_dir(&store_dir)
        .unwrap()
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .collect();
    println!("local store files: {files:?}");
    for file in ["events.db", "events.db-wal", "events.db-shm"] {
        assert!(files.iter().any(|f| f == file), "no {file}: {files:?}");
    }
    // The store's files as bytes, every run's stdout and stderr, the templates.
    scanner.scan_dir(&cli.dir).unwrap();
    let events = scanner
        .scan_event_store(&store, "local store")
        .await
        .unwrap();
    assert!(events > 20, "only {events} events were read back");
    let objects = scan_other_buckets(&mut scanner, emu, &[]).await;
    println!("S3 objects in the emulator: {objects}");
    assert_clean(&scanner, "embedded engine", started);
}

/// Kills the worker when the test ends, however it ends.
struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `stackflow worker` with the engine's state machines, once it polls.
fn start_worker(cli: &Cli) -> Worker {
    let args = ["worker", "--create-state-machines", ROLE, "-vv"];
    let worker = Worker(cli.spawn(&args, "worker.stderr"));
    let log = cli.dir.join("worker.stderr");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("polling")) {
        assert!(Instant::now() < deadline, "the worker does not poll");
        std::thread::sleep(Duration::from_millis(50));
    }
    worker
}

/// The remote scenario's templates: `v1` has every kind of secret (scenarios 1 and 2),
/// `v2` adds two calls SSM refuses quoting the value (3), and `v3` imports an export that
/// does not exist, which stops the deploy in its plan.
fn remote_templates(cli: &Cli, src: &Sources) -> [String; 3] {
    let n = |leaf: &str| src.name("r", leaf);
    let mut v1 = secrets_template(src, "r");
    v1["Outputs"]["Remote"] = json!({"Value": {"Fn::Sub": "remote-${Pw}"}});
    let mut v2 = v1.clone();
    v2["Resources"]["Extra"] = param(n("extra"), json!(src.sm_json_ref()));
    v2["Resources"]["BadEcho"] = refused(n("bad-echo"), json!({"Ref": "Pw"}), &["Extra"]);
    v2["Resources"]["BadDyn"] = refused(n("bad-dyn"), json!(src.sm_plain_ref()), &["Extra"]);
    let mut v3 = v1.clone();
    let missing = json!({"Fn::ImportValue": unique_name("no-such-export")});
    v3["Resources"]["Missing"] = param(n("missing"), missing);
    [
        ("remote-v1.json", v1),
        ("remote-v2.json", v2),
        ("remote-v3.json", v3),
    ]
    .map(|(file, v)| write_json(&cli.dir, file, &v))
}

/// `deploy --remote PATH --stack STACK FLAGS... PARAMETERS...`, which must exit `code`.
fn deploy_remote(cli: &Cli, s: &Secrets, path: &str, stack: &str, flags: &[&str], code: i32) {
    let mut fixed = vec!["deploy", "--remote", path, "--stack", stack];
    fixed.extend_from_slice(flags);
    let params = s.parameters(&["Pw", "Quoted", "Csv"]);
    expect(s, cli.run(&args(&fixed, &params)), code);
}

/// Scenario 4 (with 1 to 3): the secrets deployed as Step Functions executions, a deploy
/// that changes nothing, a refused call kept for `rollback --remote`, then rolled back by
/// the deploy's own execution, a deploy stopped in its plan, and the destroy.
async fn remote_stack(cli: &Cli, ssm: &aws_sdk_ssm::Client, s: &Secrets, src: &Sources) {
    let stack = unique_name("ScanRemote");
    let [v1, v2, v3] = remote_templates(cli, src);
    deploy_remote(cli, s, &v1, &stack, &["-vv"], 0);
    assert_param(ssm, &src.name("r", "ssm-secure"), &s.ssm_secure).await;
    let sub = format!("user:{}@db", s.pw);
    assert_param(ssm, &src.name("r", "noecho-sub"), &sub).await;
    deploy_remote(cli, s, &v1, &stack, &["--json"], 0);
    let params = s.parameters(&["Pw", "Quoted", "Csv"]);
    diff_both_ways(cli, s, &v1, &stack, &params);
    deploy_remote(cli, s, &v2, &stack, &["--no-rollback", "-vv"], 1);
    assert_refusal_recorded(s, &show_everything(cli, s, &stack));
    let rollback = ["rollback", "--remote", "--stack", &stack, "-vv"];
    expect(s, cli.run(&rollback), 0);
    deploy_remote(cli, s, &v2, &stack, &["-vv"], 1);
    show_everything(cli, s, &stack);
    scrub_finds_nothing(cli, s, &v2, &stack, &params);
    deploy_remote(cli, s, &v3, &stack, &["-vv"], 1);
    let destroy = ["destroy", "--remote", "--stack", &stack, "-vv"];
    expect(s, cli.run(&destroy), 0);
    expect(s, cli.run(&["events", "--stack", &stack, "--json"]), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_functions_deploys_write_no_secret_anywhere() {
    let started = Instant::now();
    let emu = Emulator::shared().await;
    let s = Secrets::new();
    let src = Sources::create(emu, &s).await;
    let config = emu.sdk_config().await;
    let ssm = aws_sdk_ssm::Client::new(&config);
    let s3 = emu.s3().await;
    let bucket = unique_name("scan-engine");
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let table = unique_name("scan-events");
    let engine = unique_name("scan-eng");
    let cli = Cli {
        dir: test_dir("remote"),
        endpoint: emu.endpoint().to_string(),
        store: format!("dynamodb:{table}"),
        bucket: Some(bucket.clone()),
        engine: Some(engine.clone()),
    };
    expect(&s, cli.run(&["init"]), 0);
    let worker = start_worker(&cli);
    remote_stack(&cli, &ssm, &s, &src).await;
    drop(worker);

    let mut scanner = s.scanner();
    // Every run's stdout and stderr, the worker's log, the templates.
    scanner.scan_dir(&cli.dir).unwrap();
    let ddb = aws_sdk_dynamodb::Client::new(&config);
    let items = scanner.scan_dynamodb_table(&ddb, &table).await.unwrap();
    let store = DynamoStore::new(ddb, s3.clone(), table.clone(), Some(bucket.clone()));
    let events = scanner
        .scan_event_store(&store, "dynamodb store")
        .await
        .unwrap();
    let objects = scanner.scan_bucket(&s3, &bucket).await.unwrap();
    let sfn = aws_sdk_sfn::Client::new(&config);
    let mut executions = 0;
    let mut histories = String::new();
    for operation in ["deploy", "destroy", "rollback"] {
        let machine =
            format!("arn:aws:states:us-east-1:123456789012:stateMachine:{engine}-{operation}");
        let (n, text) = scanner.scan_executions(&sfn, &machine).await.unwrap();
        executions += n;
        histories.push_str(&text);
    }
    // Kept for reading after a failure (written after the directory was scanned).
    std::fs::write(cli.dir.join("histories.txt"), &histories).unwrap();
    // The histories were read with their data: the tasks' inputs and outputs, with the
    // error of each refused call (SSM's message, masked) and the deploy's failure.
    for seen in [
        "TaskScheduled",
        "Stackflow.DeployFailed",
        "satisfy constraint",
    ] {
        assert!(
            histories.contains(seen),
            "the execution histories never say {seen}"
        );
    }
    scan_other_buckets(&mut scanner, emu, &[bucket.as_str()]).await;
    println!(
        "{items} items, {events} events, {objects} objects in the engine's bucket, {executions} executions"
    );
    assert!(items > 20 && events > 20 && objects > 0 && executions >= 6);
    assert_clean(&scanner, "step functions", started);
}
