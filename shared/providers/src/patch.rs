//! JSON documents for Cloud Control: removing schema paths from a property map, and the
//! RFC 6902 patch from one set of properties to another.

use serde_json::{Map, Value, json};

/// `properties` without the values at `paths` (schema paths, `/`-separated, `*` for any
/// list item or map key), e.g. the read-only properties of a type.
pub fn without_paths(properties: &Map<String, Value>, paths: &[String]) -> Map<String, Value> {
    let mut value = Value::Object(properties.clone());
    for path in paths {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        remove_path(&mut value, &segments);
    }
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn remove_path(value: &mut Value, segments: &[&str]) {
    let Some((first, rest)) = segments.split_first() else {
        return;
    };
    match value {
        Value::Object(map) => {
            if *first == "*" {
                for child in map.values_mut() {
                    remove_path(child, rest);
                }
            } else if rest.is_empty() {
                map.shift_remove(*first);
            } else if let Some(child) = map.get_mut(*first) {
                remove_path(child, rest);
            }
        }
        Value::Array(items) if *first == "*" => {
            for child in items.iter_mut() {
                remove_path(child, rest);
            }
        }
        _ => {}
    }
}

/// Escapes one JSON pointer segment (RFC 6901).
pub fn pointer_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The RFC 6902 patch that turns `previous` into `desired`, at top-level granularity:
/// `add` for a new key, `replace` for a changed one (the whole value), `remove` for a
/// dropped one, in `desired`'s key order (removals last). When anything changes, every
/// key of `desired` under `resend` (the write-only properties, which a service never
/// reports back, so the update handler would otherwise not see them) that is not in the
/// patch yet is added with `add`. Nothing changed: an empty patch.
pub fn diff_patch(
    previous: &Map<String, Value>,
    desired: &Map<String, Value>,
    resend: &[&str],
) -> Vec<Value> {
    let mut ops = Vec::new();
    let mut touched = Vec::new();
    for (key, value) in desired {
        let path = format!("/{}", pointer_segment(key));
        match previous.get(key) {
            None => ops.push(json!({"op": "add", "path": path, "value": value})),
            Some(old) if old != value => {
                ops.push(json!({"op": "replace", "path": path, "value": value}));
            }
            Some(_) => continue,
        }
        touched.push(key.as_str());
    }
    for key in previous.keys() {
        if !desired.contains_key(key) {
            ops.push(json!({"op": "remove", "path": format!("/{}", pointer_segment(key))}));
        }
    }
    if ops.is_empty() {
        return ops;
    }
    for key in resend {
        if let Some(value) = desired.get(*key)
            && !touched.contains(key)
        {
            ops.push(
                json!({"op": "add", "path": format!("/{}", pointer_segment(key)), "value": value}),
            );
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn removes_top_level_nested_and_wildcard_paths() {
        let props = map(json!({
            "Arn": "a", "Name": "n",
            "Endpoint": {"Address": "x", "Port": 1},
            "Items": [{"Id": 1, "K": 2}, {"Id": 3}]
        }));
        let got = without_paths(
            &props,
            &[
                "Arn".into(),
                "Endpoint/Address".into(),
                "Items/*/Id".into(),
                "Missing/X".into(),
            ],
        );
        assert_eq!(
            Value::Object(got),
            json!({"Name": "n", "Endpoint": {"Port": 1}, "Items": [{"K": 2}, {}]})
        );
    }

    #[test]
    fn patch_adds_replaces_removes_and_resends_write_only() {
        let old = map(json!({"A": 1, "B": {"x": 1}, "C": "gone", "Secret": "s", "Same": true}));
        let new = map(json!({"A": 2, "B": {"x": 1}, "D/e~f": [1], "Secret": "s", "Same": true}));
        let patch = diff_patch(&old, &new, &["Secret", "NotSet"]);
        assert_eq!(
            Value::Array(patch),
            json!([
                {"op": "replace", "path": "/A", "value": 2},
                {"op": "add", "path": "/D~1e~0f", "value": [1]},
                {"op": "remove", "path": "/C"},
                {"op": "add", "path": "/Secret", "value": "s"}
            ])
        );
    }

    #[test]
    fn no_change_no_patch_even_with_write_only() {
        let old = map(json!({"A": 1, "Secret": "s"}));
        assert!(diff_patch(&old, &old.clone(), &["Secret"]).is_empty());
        let new = map(json!({"A": 1, "Secret": "t"}));
        assert_eq!(
            Value::Array(diff_patch(&old, &new, &["Secret"])),
            json!([{"op": "replace", "path": "/Secret", "value": "t"}])
        );
    }
}
