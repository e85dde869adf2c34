//! Stacks run as their dependencies allow (`--stack-concurrency`): a stack starts once
//! every stack it depends on (among those selected) has ended and may be built on, at most
//! N at once. After one ends in a way that stops the run (a failure), nothing new starts;
//! the running ones finish.

use std::collections::BTreeSet;
use std::future::Future;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

/// One item to run: its name, the names it depends on, and what `run` takes.
pub struct Item<T> {
    pub name: String,
    pub dependencies: Vec<String>,
    pub value: T,
}

/// Runs `run` on each item as described in the module; the results of the items that ran,
/// in the items' order. `go_on` says whether a result lets the run go on (and its
/// dependents start).
pub async fn run_by_dependencies<T, R, F, Fut>(
    items: Vec<Item<T>>,
    concurrency: usize,
    mut run: F,
    go_on: impl Fn(&R) -> bool,
) -> Vec<(String, R)>
where
    F: FnMut(T) -> Fut,
    Fut: Future<Output = R>,
{
    let order: Vec<String> = items.iter().map(|i| i.name.clone()).collect();
    let selected: BTreeSet<String> = order.iter().cloned().collect();
    let mut waiting: Vec<Item<T>> = items;
    let mut kept: BTreeSet<String> = BTreeSet::new();
    let mut running = FuturesUnordered::new();
    let mut results: Vec<(String, R)> = Vec::new();
    let mut stopped = false;
    loop {
        while !stopped && running.len() < concurrency.max(1) {
            let ready = waiting.iter().position(|i| {
                i.dependencies
                    .iter()
                    .all(|d| kept.contains(d) || !selected.contains(d))
            });
            let Some(pos) = ready else { break };
            let item = waiting.remove(pos);
            let name = item.name;
            let fut = run(item.value);
            running.push(async move { (name, fut.await) });
        }
        let Some((name, result)) = running.next().await else {
            break;
        };
        if go_on(&result) {
            kept.insert(name.clone());
        } else {
            stopped = true;
        }
        results.push((name, result));
    }
    results.sort_by_key(|(name, _)| order.iter().position(|n| n == name));
    results
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::sync::Notify;

    use super::*;

    fn item(name: &str, deps: &[&str]) -> Item<String> {
        Item {
            name: name.into(),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            value: name.into(),
        }
    }

    /// Two independent stacks run at once: each waits for the other to have started,
    /// which ends only when they overlap (one after the other, the first would wait
    /// forever; the test's timeout says so).
    #[tokio::test]
    async fn independent_items_run_at_once_and_dependents_after() {
        let started: Arc<Mutex<Vec<String>>> = Arc::default();
        let (a_in, b_in) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let log = started.clone();
        let run = move |name: String| {
            let (log, a_in, b_in) = (log.clone(), a_in.clone(), b_in.clone());
            async move {
                log.lock().unwrap().push(name.clone());
                match name.as_str() {
                    "A" => {
                        a_in.notify_one();
                        b_in.notified().await;
                    }
                    "B" => {
                        b_in.notify_one();
                        a_in.notified().await;
                    }
                    _ => {}
                }
                name
            }
        };
        let items = vec![item("A", &[]), item("B", &[]), item("C", &["A", "B"])];
        let ended = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            run_by_dependencies(items, 2, run, |_| true),
        )
        .await
        .expect("A and B overlap");
        let names: Vec<&str> = ended.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["A", "B", "C"]);
        assert_eq!(
            started.lock().unwrap().last().map(String::as_str),
            Some("C")
        );
    }

    #[tokio::test]
    async fn one_at_a_time_keeps_the_order_and_a_failure_starts_nothing_new() {
        let started: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = started.clone();
        let run = move |name: String| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(name.clone());
                name != "B"
            }
        };
        let items = vec![
            item("A", &[]),
            item("B", &[]),
            item("C", &[]),
            item("D", &["B"]),
        ];
        let ended = run_by_dependencies(items, 1, run, |ok| *ok).await;
        assert_eq!(
            ended,
            [("A".to_string(), true), ("B".to_string(), false)],
            "B failed: C and D never start"
        );
        assert_eq!(*started.lock().unwrap(), ["A", "B"]);
        // A dependency outside the selection does not hold a stack back.
        let items = vec![item("X", &["NotSelected"])];
        let ended = run_by_dependencies(items, 3, |n: String| async move { n }, |_| true).await;
        assert_eq!(ended.len(), 1);
    }
}
