//! Deploys of one stack that overlap, run as users run them: `stackflow` processes.
//!
//! Ten deploys started at once: exactly one runs; the nine others are refused with the
//! locked exit code, naming the run that holds the lock and saying how to break it if that
//! run is gone. Afterwards AWS holds each resource once, and the log holds one deploy,
//! whole (started, completed, nothing left pending, the lock released). Embedded with the
//! local store (one working directory), embedded with the DynamoDB store, and remote (ten
//! Step Functions executions, their tasks run by one `stackflow worker`).
//!
//! "At once" is made deterministic by a gate proxy between the runs and the emulator
//! (`stackflow_tests::gate`): it holds every resource create, so the run that took the
//! lock waits at its first create until the nine others have been refused and exited.
//!
//! And a deploy that finishes while another is planning: the second has read the log and
//! waits in its lookups (held at the gate) while the first runs to its end; let go, it
//! takes the lock, plans again from the log as it is then, and makes nothing twice.
//!
//! And two runs in two pid namespaces (two containers of one host): the second never
//! takes the first for gone because it cannot see its pid.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use stackflow_events::event::{Event, Holder};
use stackflow_events::projection::StackState;
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{EventStore, StreamId, load_state};
use stackflow_tests::cli::{Cli, RUN_TIMEOUT, Run};
use stackflow_tests::gate::GateProxy;
use stackflow_tests::inventory::Inventory;
use stackflow_tests::{Emulator, unique_name};

/// Deploys started at once.
const RUNS: usize = 10;
/// The exit code of a run refused because another holds the stack's lock.
const LOCKED: i32 = 3;
/// The calls that create the stack's resources: held at the gate.
const CREATES: &[&str] = &["CreateQueue", "CreateTopic", "PutParameter"];
/// Longest the refusals may take to come.
const REFUSALS: Duration = Duration::from_secs(150);
/// The resources of [`STACK`], by logical id and type.
const RESOURCES: &[(&str, &str)] = &[
    ("Queue", "AWS::SQS::Queue"),
    ("Topic", "AWS::SNS::Topic"),
    ("Param", "AWS::SSM::Parameter"),
];
/// Three resources with generated names (a second create would make a second one).
const STACK: &str = "Resources:
  Queue:
    Type: AWS::SQS::Queue
  Topic:
    Type: AWS::SNS::Topic
  Param:
    Type: AWS::SSM::Parameter
    Properties:
      Type: String
      Value: !GetAtt Queue.Arn
";

/// A directory of its own for a test: its working directory (and the local store's).
fn test_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("concurrency_cli")
        .join(unique_name(name));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `body` as `<dir>/<sub>/<stack>.yaml` (the stack's name is the file's stem).
fn template(dir: &Path, sub: &str, stack: &str, body: &str) -> String {
    let path = dir.join(sub).join(format!("{stack}.yaml"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

fn cli(dir: &Path, endpoint: &str, store: &str) -> Cli {
    Cli {
        dir: dir.to_path_buf(),
        endpoint: endpoint.to_string(),
        store: store.to_string(),
        bucket: None,
        engine: None,
    }
}

/// One started process and where its output goes.
struct Running {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    ended: Option<Option<i32>>,
}

/// [`RUNS`] processes of one command, started at once.
struct Round {
    args: Vec<String>,
    runs: Vec<Running>,
}

impl Round {
    fn start(cli: &Cli, args: &[&str]) -> Round {
        let runs = (0..RUNS)
            .map(|i| {
                let out = cli.dir.join(format!("round-{i}.stdout"));
                let err = cli.dir.join(format!("round-{i}.stderr"));
                let child = cli
                    .command(args)
                    .stdout(File::create(&out).unwrap())
                    .stderr(File::create(&err).unwrap())
                    .spawn()
                    .expect("stackflow starts");
                Running {
                    child,
                    out,
                    err,
                    ended: None,
                }
            })
            .collect();
        Round {
            args: args.iter().map(|a| a.to_string()).collect(),
            runs,
        }
    }

    /// Notes the runs that ended; how many have.
    fn poll(&mut self) -> usize {
        for r in &mut self.runs {
            if r.ended.is_none()
                && let Some(status) = r.child.try_wait().expect("try_wait")
            {
                r.ended = Some(status.code());
            }
        }
        self.runs.iter().filter(|r| r.ended.is_some()).count()
    }

    /// Waits until a create reached the gate and all runs but one have ended (false when
    /// that did not happen in [`REFUSALS`]): the one left holds the lock, held at the gate.
    async fn wait_for_refusals(&mut self, gate: &GateProxy) -> bool {
        let deadline = Instant::now() + REFUSALS;
        while Instant::now() < deadline {
            if self.poll() >= RUNS - 1 && gate.arrived() > 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// The pid of the one run still going.
    fn running_pid(&mut self) -> Option<u32> {
        self.poll();
        let mut left = self.runs.iter().filter(|r| r.ended.is_none());
        let one = left.next()?;
        left.next().is_none().then(|| one.child.id())
    }

    /// Waits for every run to end: (pid, run) of each.
    async fn finish(mut self) -> Vec<(u32, Run)> {
        let deadline = Instant::now() + RUN_TIMEOUT;
        while self.poll() < RUNS {
            if Instant::now() > deadline {
                for r in &mut self.runs {
                    let _ = r.child.kill();
                    let _ = r.child.wait();
                }
                panic!("the runs of {:?} did not end in {RUN_TIMEOUT:?}", self.args);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let args = self.args.clone();
        self.runs
            .into_iter()
            .map(|r| {
                let run = Run {
                    args: args.clone(),
                    code: r.ended.flatten(),
                    stdout: std::fs::read_to_string(&r.out).unwrap_or_default(),
                    stderr: std::fs::read_to_string(&r.err).unwrap_or_default(),
                };
                (r.child.id(), run)
            })
            .collect()
    }
}

/// Starts the round of `args`, and once the nine refusals are in, checks the lock's holder
/// (read by `holder`) with `holder_check` (given the holder and the pid of the run still
/// going) and opens the gate.
async fn ten_at_once(
    cli: &Cli,
    gate: &GateProxy,
    args: &[&str],
    holder: impl AsyncFn() -> Option<Holder>,
    holder_check: impl Fn(&Holder, u32),
) -> Vec<(u32, Run)> {
    let mut round = Round::start(cli, args);
    let refused_in_time = round.wait_for_refusals(gate).await;
    let held = round.running_pid().zip(holder().await);
    gate.open();
    let runs = round.finish().await;
    let all = || -> String { runs.iter().map(|(_, r)| r.describe() + "\n").collect() };
    assert!(
        refused_in_time,
        "nine runs were not refused while one held the lock at its first create \
         (gated calls: {:?}):\n{}",
        gate.labels(),
        all()
    );
    let (pid, holder) = held.unwrap_or_else(|| panic!("no lock held at the gate:\n{}", all()));
    holder_check(&holder, pid);
    runs
}

/// Exactly one run ended 0 and nine with [`LOCKED`]; the winner.
fn one_ran_nine_refused(runs: &[(u32, Run)]) -> (u32, &Run, Vec<&Run>) {
    let all = || -> String { runs.iter().map(|(_, r)| r.describe() + "\n").collect() };
    let ran: Vec<&(u32, Run)> = runs.iter().filter(|(_, r)| r.code == Some(0)).collect();
    let refused: Vec<&Run> = runs
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.code == Some(LOCKED))
        .collect();
    assert_eq!(ran.len(), 1, "exactly one run deploys:\n{}", all());
    assert_eq!(refused.len(), RUNS - 1, "nine are refused:\n{}", all());
    (ran[0].0, &ran[0].1, refused)
}

/// The log holds one deploy, whole: started and completed, no failure, no rollback, no
/// broken lock, nothing pending, the lock released. Its deploy id.
fn one_whole_deploy(events: &[Event], state: &StackState) -> String {
    let started: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            Event::DeployStarted { deploy_id, .. } => Some(deploy_id),
            _ => None,
        })
        .collect();
    assert_eq!(started.len(), 1, "one deploy started: {events:#?}");
    let completed = events
        .iter()
        .filter(
            |e| matches!(e, Event::DeployCompleted { deploy_id, .. } if deploy_id == started[0]),
        )
        .count();
    assert_eq!(completed, 1, "and completed: {events:#?}");
    let other = events.iter().find(|e| {
        matches!(
            e,
            Event::DeployFailed { .. } | Event::RollbackStarted { .. } | Event::LockBroken { .. }
        )
    });
    assert!(other.is_none(), "{other:?}");
    assert!(state.pending.is_empty(), "{:?}", state.pending);
    assert!(state.lock.is_none(), "{:?}", state.lock);
    started[0].clone()
}

/// AWS holds each of `resources` of `stack` exactly once: the one recorded.
async fn each_once(stack: &str, state: &StackState, resources: &[(&str, &str)]) {
    let inventory = Inventory::new(Emulator::shared().await).await;
    assert_eq!(state.resources.len(), resources.len(), "{state:#?}");
    for (logical, ty) in resources {
        let found = inventory.tagged(ty, stack).await.unwrap();
        assert_eq!(found.len(), 1, "{logical}: {found:?}");
        let recorded = &state.resources[*logical].physical_id;
        assert!(
            inventory.exists(ty, recorded, true).await.unwrap(),
            "{logical}: {recorded} is not in AWS"
        );
    }
}

/// The events of `stream`, and its state.
async fn log<S: EventStore>(store: &S, stream: &StreamId) -> (Vec<Event>, StackState) {
    let events = store.read(stream, 0).await.unwrap();
    let state = load_state(store, stream).await.unwrap();
    (events.into_iter().map(|e| e.event).collect(), state)
}

/// The `deploy --json` report of the run's one stack.
fn report(run: &Run) -> Value {
    let out: Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.describe()));
    out["stacks"][0].clone()
}

/// Whether `text` says `pid N` of this `pid`.
fn names_pid(text: &str, pid: u32) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .any(|w| w[0] == "pid" && w[1] == pid.to_string())
}

/// A refusal names the holder (`who`, its deploy) and the way out if it is gone.
fn names_the_holder(output: &str, who: &str, deploy_id: &str) {
    assert!(
        output.contains(who),
        "names who holds the lock ({who}):\n{output}"
    );
    assert!(
        output.contains(deploy_id),
        "names its deploy {deploy_id}:\n{output}"
    );
    assert!(
        output.contains("if that run is gone") && output.contains("stackflow unlock --stack"),
        "says how to break it if the holder is gone:\n{output}"
    );
}

/// Ten embedded deploys of one stack in one round; `store` opens the store they share.
async fn embedded_round<S: EventStore>(cli: &Cli, gate: &GateProxy, store: impl Fn() -> Arc<S>) {
    let stack = unique_name("conc");
    let path = template(&cli.dir, "v1", &stack, STACK);
    let stream = StreamId::new("us-east-1", &stack);
    let runs = ten_at_once(
        cli,
        gate,
        &["deploy", &path, "--json"],
        async || store().lock_holder(&stream).await.unwrap(),
        |holder, pid| {
            // A CLI run holds a lease, under its process's name.
            assert!(names_pid(&holder.who, pid), "{holder:?}");
            assert!(holder.expires.is_some(), "{holder:?}");
        },
    )
    .await;
    let (pid, winner, refused) = one_ran_nine_refused(&runs);
    let r = report(winner);
    assert_eq!(r["status"], "succeeded", "{}", winner.describe());
    assert_eq!(r["created"], 3, "{}", winner.describe());

    let (events, state) = log(store().as_ref(), &stream).await;
    let deploy_id = one_whole_deploy(&events, &state);
    assert_eq!(r["deployId"], deploy_id.as_str());
    for run in refused {
        // Refused with --json: the error, as JSON, is all stdout holds.
        let error: serde_json::Value =
            serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.describe()));
        assert_eq!(error["error"]["exitCode"], 3, "{}", run.describe());
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&deploy_id), "{}", run.describe());
        assert!(
            names_pid(&run.stderr, pid),
            "names the winner, pid {pid}: {}",
            run.describe()
        );
        names_the_holder(&run.stderr, "locked by tester@", &deploy_id);
    }
    each_once(&stack, &state, RESOURCES).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_embedded_deploys_on_the_local_store_one_runs_nine_are_refused() {
    let emu = Emulator::shared().await;
    let gate = GateProxy::start(emu.endpoint(), CREATES).await.unwrap();
    let dir = test_dir("local");
    // The default store: `.stackflow/` in the working directory all ten share.
    let cli = cli(&dir, &gate.endpoint(), "local");
    let file = dir.join(".stackflow").join("events.db");
    embedded_round(&cli, &gate, || Arc::new(SqliteStore::open(&file).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_embedded_deploys_on_the_dynamodb_store_one_runs_nine_are_refused() {
    let emu = Emulator::shared().await;
    let gate = GateProxy::start(emu.endpoint(), CREATES).await.unwrap();
    let (table, bucket, store) = stackflow_tests::deploy::dynamo_store(emu).await;
    let mut cli = cli(
        &test_dir("dynamodb"),
        &gate.endpoint(),
        &format!("dynamodb:{table}"),
    );
    cli.bucket = Some(bucket);
    embedded_round(&cli, &gate, || store.clone()).await;
}

/// `stackflow worker` in the background, killed when the test ends however it ends (its
/// log shown when the test failed).
struct Worker(Child, PathBuf);

impl Worker {
    /// Starts the worker of `cli`'s engine, creating its state machines, and waits until
    /// it polls.
    async fn start(cli: &Cli) -> Worker {
        let role = "arn:aws:iam::123456789012:role/stackflow-engine";
        let log = cli.dir.join("worker.log");
        let child = cli.spawn(&["worker", "--create-state-machines", role], "worker.log");
        let worker = Worker(child, log.clone());
        for _ in 0..1200 {
            if std::fs::read_to_string(&log).is_ok_and(|l| l.contains("polling")) {
                return worker;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "the worker does not poll: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.1).unwrap_or_default();
            let exited = self.0.try_wait().ok().flatten();
            eprintln!("--- worker ({exited:?}) ---\n{log}");
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_remote_deploys_one_execution_runs_nine_are_refused_naming_it() {
    let emu = Emulator::shared().await;
    let gate = GateProxy::start(emu.endpoint(), CREATES).await.unwrap();
    let dir = test_dir("remote");
    let bucket = unique_name("conc-engine");
    emu.s3()
        .await
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap();
    // The worker runs the executions' tasks, its AWS calls through the gate; the deploys
    // start executions and follow them in the log (one local store, as on one machine).
    let mut worker_cli = cli(&dir, &gate.endpoint(), "local");
    worker_cli.bucket = Some(bucket);
    worker_cli.engine = Some(unique_name("eng"));
    let worker = Worker::start(&worker_cli).await;
    let deploys = Cli {
        endpoint: emu.endpoint().to_string(),
        ..worker_cli.clone()
    };
    let stack = unique_name("conc");
    let path = template(&dir, "v1", &stack, STACK);
    let stream = StreamId::new("us-east-1", &stack);
    let file = dir.join(".stackflow").join("events.db");
    let store = || Arc::new(SqliteStore::open(&file).unwrap());
    let runs = ten_at_once(
        &deploys,
        &gate,
        &["deploy", &path, "--remote"],
        async || store().lock_holder(&stream).await.unwrap(),
        |holder, _| {
            // An execution's lock: no lease (no task renews it), and a holder name that
            // no liveness check takes for a process.
            assert!(holder.expires.is_none(), "{holder:?}");
            assert!(holder.who.starts_with("worker "), "{holder:?}");
        },
    )
    .await;
    let (_, winner, refused) = one_ran_nine_refused(&runs);
    let (events, state) = log(store().as_ref(), &stream).await;
    let deploy_id = one_whole_deploy(&events, &state);
    // The execution is named after its deploy.
    let execution = |run: &Run| -> String {
        let line = run
            .stderr
            .lines()
            .find_map(|l| l.split_once(": execution "));
        let arn = line.unwrap_or_else(|| panic!("no execution named: {}", run.describe()));
        arn.1.to_string()
    };
    assert!(
        execution(winner).ends_with(&format!(":{deploy_id}")),
        "{}",
        winner.describe()
    );
    assert!(
        winner.stdout.contains(": succeeded ("),
        "{}",
        winner.describe()
    );
    for run in refused {
        // Its own execution failed, with the Plan task's error: the lock and its holder.
        let failed = format!("FAILED ({}): Stackflow.PlanFailed: ", execution(run));
        assert!(run.stdout.contains(&failed), "{}", run.describe());
        let why = format!("{stack}: the last task failure: Stackflow.Locked: stack is locked by ");
        assert!(run.stdout.contains(&why), "{}", run.describe());
        names_the_holder(&run.stdout, "locked by worker tester@", &deploy_id);
        let pid = format!(" {} (deploy {deploy_id}", worker.0.id());
        assert!(
            run.stdout.contains(&pid),
            "the worker's pid: {}",
            run.describe()
        );
    }
    each_once(&stack, &state, RESOURCES).await;
}

/// [`STACK`]'s queue and topic, the topic asking for the region's availability zones (a
/// lookup, made before the plan).
const ZONED: &str = "Resources:
  Queue:
    Type: AWS::SQS::Queue
  Topic:
    Type: AWS::SNS::Topic
    Properties:
      DisplayName: !Select [0, !GetAZs '']
";
/// [`STACK`]'s parameter.
const PARAM: &str = "  Param:
    Type: AWS::SSM::Parameter
    Properties:
      Type: String
      Value: !GetAtt Queue.Arn
";

/// Waits for `child` to end (killed after [`RUN_TIMEOUT`]).
async fn wait(mut child: Child, args: &[&str], out: &Path, err: &Path) -> Run {
    let deadline = Instant::now() + RUN_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} ran for more than {RUN_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        code: status.code(),
        stdout: std::fs::read_to_string(out).unwrap_or_default(),
        stderr: std::fs::read_to_string(err).unwrap_or_default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_that_finishes_while_another_plans_leaves_no_duplicate() {
    let emu = Emulator::shared().await;
    // B's lookup of the availability zones waits at the gate: B has read the log then.
    let gate = GateProxy::start(emu.endpoint(), &["DescribeAvailabilityZones"])
        .await
        .unwrap();
    let dir = test_dir("planning");
    let stack = unique_name("conc");
    let v1 = template(&dir, "v1", &stack, ZONED);
    let v2 = template(&dir, "v2", &stack, &format!("{ZONED}{PARAM}"));
    let b_args = ["deploy", &v2, "--json"];
    let (b_out, b_err) = (dir.join("b.stdout"), dir.join("b.stderr"));
    let b = cli(&dir, &gate.endpoint(), "local")
        .command(&b_args)
        .stdout(File::create(&b_out).unwrap())
        .stderr(File::create(&b_err).unwrap())
        .spawn()
        .unwrap();
    let planning = gate.wait_arrival(Duration::from_secs(90)).await;
    // Meanwhile A deploys v1 to its end.
    let a = cli(&dir, emu.endpoint(), "local").run(&["deploy", &v1, "--json"]);
    gate.open();
    let b = wait(b, &b_args, &b_out, &b_err).await;
    assert!(planning, "B never looked the zones up: {}", b.describe());
    assert_eq!(a.code, Some(0), "{}", a.describe());
    assert_eq!(report(&a)["created"], 2, "{}", a.describe());
    // B took the lock after A released it, planned again from the log, and made only
    // what v2 adds.
    assert_eq!(b.code, Some(0), "{}", b.describe());
    assert_eq!(report(&b)["status"], "succeeded", "{}", b.describe());
    assert_eq!(report(&b)["created"], 1, "{}", b.describe());

    let store = SqliteStore::open(dir.join(".stackflow").join("events.db")).unwrap();
    let (events, state) = log(&store, &StreamId::new("us-east-1", &stack)).await;
    let ends: Vec<(&str, &String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::DeployStarted { deploy_id, .. } => Some(("started", deploy_id)),
            Event::DeployCompleted { deploy_id, .. } => Some(("completed", deploy_id)),
            Event::DeployFailed { deploy_id, .. } => Some(("failed", deploy_id)),
            _ => None,
        })
        .collect();
    let (a_id, b_id) = (&report(&a)["deployId"], &report(&b)["deployId"]);
    let want = [
        ("started", a_id),
        ("completed", a_id),
        ("started", b_id),
        ("completed", b_id),
    ];
    let want: Vec<(&str, String)> = want
        .iter()
        .map(|(k, id)| (*k, id.as_str().unwrap().to_string()))
        .collect();
    let ends: Vec<(&str, String)> = ends.into_iter().map(|(k, id)| (k, id.clone())).collect();
    assert_eq!(ends, want, "A, then B, each whole");
    assert!(
        state.pending.is_empty() && state.lock.is_none(),
        "{state:#?}"
    );
    each_once(&stack, &state, RESOURCES).await;
}

/// `cmd` run in a pid namespace of its own (`unshare --pid --fork --mount-proc`, as a
/// container is), after `burn` short-lived processes there so that its pid is not a low
/// one. `None` where namespaces cannot be made (not root).
fn in_own_pid_namespace(cmd: &Command, burn: usize) -> Option<Command> {
    let works = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        return None;
    }
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c"])
        // Not `exec`: that would keep the shell's pid, 1.
        .arg(r#"i=0; while [ "$i" -lt "$0" ]; do /bin/true; i=$((i+1)); done; "$@""#)
        .arg(burn.to_string())
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear()
        .stdin(std::process::Stdio::null());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    Some(wrapped)
}

/// Issue 23 item 3: two runs in two containers of one host (two pid namespaces, one boot):
/// the second cannot see the first's pid, and must not take that for proof that it is
/// gone. It is refused as locked; the first deploys to its end, and the log holds its
/// deploy whole, no lock broken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_another_pid_namespace_never_breaks_a_live_lock() {
    let emu = Emulator::shared().await;
    let gate = GateProxy::start(emu.endpoint(), CREATES).await.unwrap();
    let dir = test_dir("pidns");
    let stack = unique_name("conc");
    let path = template(&dir, "v1", &stack, STACK);
    let args = ["deploy", &path, "--json"];
    let cli = cli(&dir, &gate.endpoint(), "local");
    let (Some(mut first), Some(mut second)) = (
        in_own_pid_namespace(&cli.command(&args), 60),
        in_own_pid_namespace(&cli.command(&args), 0),
    ) else {
        eprintln!("skipped: pid namespaces cannot be made here (run as root, as CI does)");
        return;
    };
    let (a_out, a_err) = (dir.join("a.stdout"), dir.join("a.stderr"));
    let a = first
        .stdout(File::create(&a_out).unwrap())
        .stderr(File::create(&a_err).unwrap())
        .spawn()
        .unwrap();
    // A holds the lock and waits at its first create.
    let holding = gate.wait_arrival(Duration::from_secs(90)).await;
    let (b_out, b_err) = (dir.join("b.stdout"), dir.join("b.stderr"));
    let mut b = second
        .stdout(File::create(&b_out).unwrap())
        .stderr(File::create(&b_err).unwrap())
        .spawn()
        .unwrap();
    // B, refused, ends while A is still held; a B that broke the lock would wait at the
    // gate too.
    let deadline = Instant::now() + Duration::from_secs(90);
    while b.try_wait().unwrap().is_none() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    gate.open();
    let b = wait(b, &args, &b_out, &b_err).await;
    let a = wait(a, &args, &a_out, &a_err).await;
    assert!(
        holding,
        "A never reached its first create: {}",
        a.describe()
    );
    assert_eq!(b.code, Some(LOCKED), "{}", b.describe());
    assert!(!b.stderr.contains("breaking the lock"), "{}", b.describe());
    assert!(
        b.stderr.contains("locked by tester@") && b.stderr.contains(" ns "),
        "names the holder (pid above 60 in its namespace) and its namespace: {}",
        b.describe()
    );
    assert_eq!(a.code, Some(0), "{}", a.describe());
    assert_eq!(report(&a)["created"], 3, "{}", a.describe());
    let store = SqliteStore::open(dir.join(".stackflow").join("events.db")).unwrap();
    let (events, state) = log(&store, &StreamId::new("us-east-1", &stack)).await;
    let deploy_id = one_whole_deploy(&events, &state);
    assert_eq!(report(&a)["deployId"], deploy_id.as_str());
    each_once(&stack, &state, RESOURCES).await;
}
