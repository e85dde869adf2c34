//! `stackflow executions`: recent runs of the engine's state machines, newest first
//! (also part of `stackflow engine status`).

use std::process::ExitCode;
use std::time::SystemTime;

use aws_sdk_sfn::primitives::{DateTime, DateTimeFormat};
use serde::Serialize;
use stackflow_core::partition::partition;

use crate::args::{ExecutionsArgs, GlobalArgs};

/// The operations of the engine, one state machine each (`<engine>-<operation>`).
pub const OPERATIONS: &[&str] = &["deploy", "destroy", "rollback"];

/// How many executions of one state machine are looked at, at most, for a `--stack`.
const SCAN_LIMIT: usize = 1000;

/// One execution.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// The stack its input names (`None` when the input has none).
    pub stack: Option<String>,
    pub operation: String,
    /// `RUNNING`, `SUCCEEDED`, `FAILED`, `TIMED_OUT`, `ABORTED`, ...
    pub status: String,
    /// RFC 3339.
    pub started: String,
    /// RFC 3339, when it has ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Seconds from start to stop (to now, while it runs).
    pub duration_seconds: f64,
    pub name: String,
    pub arn: String,
    #[serde(skip)]
    started_at: f64,
}

/// Where the engine's state machines are.
pub struct Machines<'a> {
    pub sfn: &'a aws_sdk_sfn::Client,
    pub region: &'a str,
    pub account: &'a str,
    pub engine: &'a str,
}

impl Machines<'_> {
    /// The ARN of the state machine of `operation`.
    pub fn arn(&self, operation: &str) -> String {
        format!(
            "arn:{}:states:{}:{}:stateMachine:{}-{operation}",
            partition(self.region),
            self.region,
            self.account,
            self.engine
        )
    }

    /// The `limit` most recent runs (of `stack` only, when given), newest first. A state
    /// machine that does not exist has none; an error when none of them exists.
    pub async fn recent(&self, stack: Option<&str>, limit: usize) -> anyhow::Result<Vec<Run>> {
        let mut runs = Vec::new();
        let mut found = 0;
        for operation in OPERATIONS {
            if let Some(mut more) = self.of(operation, stack, limit).await? {
                found += 1;
                runs.append(&mut more);
            }
        }
        if found == 0 {
            anyhow::bail!(
                "no state machine {}-deploy, -destroy or -rollback in {}: is the engine installed (`stackflow engine deploy --name {}`)?",
                self.engine,
                self.region,
                self.engine
            );
        }
        runs.sort_by(|a, b| b.started_at.total_cmp(&a.started_at));
        runs.truncate(limit);
        Ok(runs)
    }

    /// The runs of one state machine, newest first (`None` when it does not exist).
    async fn of(
        &self,
        operation: &str,
        stack: Option<&str>,
        limit: usize,
    ) -> anyhow::Result<Option<Vec<Run>>> {
        let machine = self.arn(operation);
        let mut runs = Vec::new();
        let mut token = None;
        let mut scanned = 0;
        loop {
            let page = self
                .sfn
                .list_executions()
                .state_machine_arn(&machine)
                .max_results(100)
                .set_next_token(token)
                .send()
                .await;
            let page = match page {
                Ok(p) => p,
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_state_machine_does_not_exist()) =>
                {
                    return Ok(None);
                }
                Err(e) => anyhow::bail!(
                    "ListExecutions of {machine}: {}",
                    crate::aws::brief_error(&e)
                ),
            };
            for item in page.executions() {
                scanned += 1;
                let run = self.run(operation, item).await?;
                if stack.is_none_or(|s| run.stack.as_deref() == Some(s)) {
                    runs.push(run);
                }
                if runs.len() >= limit || scanned >= SCAN_LIMIT {
                    return Ok(Some(runs));
                }
            }
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                return Ok(Some(runs));
            }
        }
    }

    async fn run(
        &self,
        operation: &str,
        item: &aws_sdk_sfn::types::ExecutionListItem,
    ) -> anyhow::Result<Run> {
        let arn = item.execution_arn();
        let described = self
            .sfn
            .describe_execution()
            .execution_arn(arn)
            .send()
            .await
            .map_err(|e| {
                anyhow::anyhow!("DescribeExecution {arn}: {}", crate::aws::brief_error(&e))
            })?;
        let stack = described
            .input()
            .and_then(|i| serde_json::from_str::<serde_json::Value>(i).ok())
            .and_then(|v| v.get("stack").and_then(|s| s.as_str()).map(str::to_string));
        let started = item.start_date();
        let end = item
            .stop_date()
            .map(seconds)
            .unwrap_or_else(|| seconds(&DateTime::from(SystemTime::now())));
        Ok(Run {
            stack,
            operation: operation.to_string(),
            status: item.status().as_str().to_string(),
            started: rfc3339(started),
            stopped: item.stop_date().map(rfc3339),
            duration_seconds: ((end - seconds(started)) * 1000.0).round() / 1000.0,
            name: item.name().to_string(),
            arn: arn.to_string(),
            started_at: seconds(started),
        })
    }
}

fn seconds(t: &DateTime) -> f64 {
    t.as_secs_f64()
}

fn rfc3339(t: &DateTime) -> String {
    t.fmt(DateTimeFormat::DateTime)
        .unwrap_or_else(|_| t.secs().to_string())
}

/// The runs as lines a person reads: one header, then one line per run.
pub fn table(runs: &[Run]) -> String {
    let mut out = format!(
        "{:<20}  {:>9}  {:<9}  {:<8}  {:<24}  {}\n",
        "STARTED", "DURATION", "STATUS", "RUN", "STACK", "EXECUTION"
    );
    for r in runs {
        let started = r.started.get(..19).unwrap_or(&r.started).replace('T', " ");
        out.push_str(&format!(
            "{:<20}  {:>9}  {:<9}  {:<8}  {:<24}  {}\n",
            started,
            format!("{:.1}s", r.duration_seconds),
            r.status,
            r.operation,
            r.stack.as_deref().unwrap_or("-"),
            r.name
        ));
    }
    out
}

pub async fn run(global: &GlobalArgs, args: ExecutionsArgs) -> anyhow::Result<ExitCode> {
    let config = crate::aws::load(global).await;
    let region = crate::aws::region(&config)?;
    let account = crate::aws::account_id(&config)
        .await
        .map_err(|why| anyhow::anyhow!("the AWS account is unknown ({why})"))?;
    let sfn = aws_sdk_sfn::Client::new(&config);
    let machines = Machines {
        sfn: &sfn,
        region: &region,
        account: &account,
        engine: &args.engine.name,
    };
    let runs = machines.recent(args.stack.as_deref(), args.limit).await?;
    if args.json {
        crate::json::print(&runs)?;
    } else if runs.is_empty() {
        println!("no executions");
    } else {
        print!("{}", table(&runs));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stack: &str, status: &str, started: &str, seconds: f64) -> Run {
        Run {
            stack: Some(stack.into()),
            operation: "deploy".into(),
            status: status.into(),
            started: started.into(),
            stopped: None,
            duration_seconds: seconds,
            name: "d-1".into(),
            arn: "arn".into(),
            started_at: 0.0,
        }
    }

    #[test]
    fn the_table_has_a_line_per_run_with_its_duration() {
        let text = table(&[
            run("app", "SUCCEEDED", "2026-01-02T03:04:05.123Z", 12.345),
            run("db", "RUNNING", "2026-01-02T03:00:00Z", 3.0),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("STARTED"));
        assert!(lines[1].starts_with("2026-01-02 03:04:05"), "{}", lines[1]);
        assert!(lines[1].contains("12.3s") && lines[1].contains("SUCCEEDED"));
        assert!(lines[2].contains("RUNNING") && lines[2].contains("db"));
    }

    #[test]
    fn json_names_are_camel_case_without_the_sort_key() {
        let v = serde_json::to_value(run("app", "FAILED", "t", 1.5)).unwrap();
        assert_eq!(v["durationSeconds"], 1.5);
        assert_eq!(v["stack"], "app");
        assert!(v.get("startedAt").is_none() && v.get("stopped").is_none());
    }
}
