//! The task graph: dependencies resolved to indices, turned around for deletes, and its
//! cycles found and spelled out.

use std::collections::HashMap;

use super::Task;

/// The same graph with every edge turned around: a task now waits for the tasks
/// that depended on it (for deletes, dependents go first). Task order is kept;
/// ids not in the task list are dropped.
pub fn reversed(tasks: &[Task]) -> Vec<Task> {
    let deps = resolve(tasks);
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); tasks.len()];
    for (task, task_deps) in deps.iter().enumerate() {
        for &dep in task_deps {
            dependents[dep].push(task);
        }
    }
    tasks
        .iter()
        .zip(dependents)
        .map(|(task, dependents)| Task {
            id: task.id.clone(),
            deps: dependents
                .into_iter()
                .map(|dependent| tasks[dependent].id.clone())
                .collect(),
        })
        .collect()
}

/// Each task's dependencies as indices into `tasks`: unknown ids dropped,
/// duplicates removed. A repeated task id resolves to its first occurrence.
pub(super) fn resolve(tasks: &[Task]) -> Vec<Vec<usize>> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(tasks.len());
    for (position, task) in tasks.iter().enumerate() {
        index.entry(task.id.as_str()).or_insert(position);
    }
    tasks
        .iter()
        .map(|task| {
            let mut deps: Vec<usize> = Vec::with_capacity(task.deps.len());
            for dep in &task.deps {
                if let Some(&dep) = index.get(dep.as_str())
                    && !deps.contains(&dep)
                {
                    deps.push(dep);
                }
            }
            deps
        })
        .collect()
}

/// For each task on a dependency cycle, the message naming one such cycle
/// ("dependency cycle: a -> b -> a"); `None` for the others.
pub(super) fn cycle_messages(tasks: &[Task], deps: &[Vec<usize>]) -> Vec<Option<String>> {
    let mut messages = vec![None; tasks.len()];
    for component in strongly_connected(deps) {
        let cyclic = component.len() > 1 || deps[component[0]].contains(&component[0]);
        if !cyclic {
            continue;
        }
        let path = cycle_through(deps, &component);
        let names: Vec<&str> = path.iter().map(|&task| tasks[task].id.as_str()).collect();
        let message = format!("dependency cycle: {}", names.join(" -> "));
        for &task in &component {
            messages[task] = Some(message.clone());
        }
    }
    messages
}

/// The strongly connected components of the graph (Tarjan's algorithm, with an
/// explicit stack so deep chains cannot overflow the thread's stack).
fn strongly_connected(deps: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = deps.len();
    let mut order: Vec<Option<usize>> = vec![None; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut components = Vec::new();

    for root in 0..n {
        if order[root].is_some() {
            continue;
        }
        let mut calls: Vec<(usize, usize)> = Vec::new();
        order[root] = Some(next);
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        calls.push((root, 0));

        while let Some(&mut (node, ref mut edge)) = calls.last_mut() {
            if let Some(&dep) = deps[node].get(*edge) {
                *edge += 1;
                match order[dep] {
                    None => {
                        order[dep] = Some(next);
                        low[dep] = next;
                        next += 1;
                        stack.push(dep);
                        on_stack[dep] = true;
                        calls.push((dep, 0));
                    }
                    Some(dep_order) if on_stack[dep] => low[node] = low[node].min(dep_order),
                    Some(_) => {}
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if Some(low[node]) == order[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                component.sort_unstable();
                components.push(component);
            }
        }
    }
    components
}

/// A shortest cycle through the first task (in task-list order) of a cyclic
/// component, as the list of tasks with the first repeated at the end.
fn cycle_through(deps: &[Vec<usize>], component: &[usize]) -> Vec<usize> {
    let start = component[0];
    let mut parent: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &dep in &deps[node] {
            if dep == start {
                // Walk back from `node` to `start`, then read it forwards.
                let mut path = vec![node];
                let mut at = node;
                while at != start {
                    at = parent[&at];
                    path.push(at);
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if component.binary_search(&dep).is_ok() && dep != start && !parent.contains_key(&dep) {
                parent.insert(dep, node);
                queue.push_back(dep);
            }
        }
    }
    // A cyclic component always has a cycle through each member.
    vec![start, start]
}
