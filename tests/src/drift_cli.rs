//! What the import and drift tests share: a working directory with its own local store,
//! the `stackflow` runs they make there (each with the exit code it must end with), and
//! readers of the JSON reports of `drift`, `import`, `deploy`, `state show` and `events`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::{Cli, Run};
use crate::emulator::{Emulator, unique_name};

/// One working directory (and local store) whose runs talk to the emulator.
#[derive(Debug, Clone)]
pub struct Session {
    /// How the runs are made.
    pub cli: Cli,
}

impl Session {
    /// A new directory `<root>/<unique name>` with a store of its own.
    pub fn new(emulator: &Emulator, root: &Path, name: &str) -> Session {
        let dir = root.join(unique_name(name));
        std::fs::create_dir_all(&dir).expect("test directory");
        Session {
            cli: Cli {
                store: format!("local:{}", dir.join("store").display()),
                dir,
                endpoint: emulator.endpoint().to_string(),
                bucket: None,
                engine: None,
            },
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.cli.dir
    }

    /// Writes `body` as `<dir>/<sub>/<stack>.yaml` (a deploy names the stack after the
    /// file's stem) and returns its path.
    pub fn template(&self, sub: &str, stack: &str, body: &str) -> String {
        let path = self.dir().join(sub).join(format!("{stack}.yaml"));
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("template dir");
        std::fs::write(&path, body).expect("template written");
        path.display().to_string()
    }

    /// Runs `args`, which must exit with `code`.
    pub fn run(&self, args: &[&str], code: i32) -> Run {
        let run = self.cli.run(args);
        assert_eq!(run.code, Some(code), "{}", run.describe());
        run
    }

    /// Runs `args` with `--json`, which must exit with `code`, and parses its output.
    pub fn json(&self, args: &[&str], code: i32) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let run = self.run(&all, code);
        serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", run.describe()))
    }

    /// `stackflow drift --stack STACK [extra]... --json`, which must exit with `code`.
    pub fn drift(&self, stack: &str, extra: &[&str], code: i32) -> Drift {
        let mut args = vec!["drift", "--stack", stack];
        args.extend_from_slice(extra);
        Drift(self.json(&args, code))
    }

    /// `stackflow state show --stack STACK --json`.
    pub fn state(&self, stack: &str) -> Value {
        self.json(&["state", "show", "--stack", stack], 0)
    }

    /// `stackflow state show --stack STACK` (text).
    pub fn state_text(&self, stack: &str) -> String {
        self.run(&["state", "show", "--stack", stack], 0).stdout
    }

    /// `stackflow events --stack STACK --json`, as text.
    pub fn events_text(&self, stack: &str) -> String {
        self.run(&["events", "--stack", stack, "--json"], 0).stdout
    }
}

/// A `drift --json` report.
#[derive(Debug, Clone)]
pub struct Drift(pub Value);

impl Drift {
    /// The row of resource `id`.
    pub fn row(&self, id: &str) -> &Value {
        self.0["resources"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["logicalId"] == id))
            .unwrap_or_else(|| panic!("no drift row for {id}: {:#}", self.0))
    }

    /// The status of resource `id` (`in-sync`, `drifted`, `deleted`, ...).
    pub fn status(&self, id: &str) -> String {
        self.row(id)["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The paths of the differences of resource `id`.
    pub fn paths(&self, id: &str) -> Vec<String> {
        strings(&self.row(id)["differences"], "path")
    }

    /// Every row's `(logicalId, status)`.
    pub fn statuses(&self) -> Vec<(String, String)> {
        self.0["resources"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|r| {
                        let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
                        (s("logicalId"), s("status"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The row of resource `id` in an `import --json` report.
pub fn import_row<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["resources"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["logicalId"] == id))
        .unwrap_or_else(|| panic!("no import row for {id}: {report:#}"))
}

/// The `key` field of each item of the list `v`.
pub fn strings(v: &Value, key: &str) -> Vec<String> {
    v.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i[key].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The directory of a test binary's runs: `<CARGO_TARGET_TMPDIR>/<binary>`.
pub fn root(target_tmp: &str, binary: &str) -> PathBuf {
    let dir = PathBuf::from(target_tmp).join(binary);
    std::fs::create_dir_all(&dir).expect("test root");
    dir
}
