//! Tags: the template's lists, what changed between two sets, how a service applies it, and
//! the state's list.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::props::{invalid, value_string};
use crate::error::ProviderError;
use crate::provider::Properties;

/// The template's `Tags` (a `Key`/`Value` list) as a map; entries without a string `Key` or
/// without a `Value` are passed over.
pub(crate) fn tag_map(props: &Properties) -> HashMap<String, String> {
    props
        .get("Tags")
        .and_then(Value::as_array)
        .map(|tags| {
            tags.iter()
                .filter_map(|t| {
                    let key = t.get("Key")?.as_str()?.to_string();
                    Some((key, value_string(t.get("Value")?)))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The template's `Tags` of a `type_name` resource, in order: a list that is not one, or a
/// tag without a `Key`, is invalid; a missing `Value` is empty.
pub(crate) fn tag_pairs(
    type_name: &str,
    props: &Properties,
) -> Result<Vec<(String, String)>, ProviderError> {
    let Some(tags) = props.get("Tags") else {
        return Ok(Vec::new());
    };
    tags.as_array()
        .ok_or_else(|| invalid(type_name, "Tags must be a list of Key/Value objects"))?
        .iter()
        .map(|t| {
            let key = t
                .get("Key")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(type_name, "a tag without a Key"))?;
            let value = t.get("Value").map(value_string).unwrap_or_default();
            Ok((key.to_string(), value))
        })
        .collect()
}

/// `tags` as a service's tag type, each made by `build` (a builder's `key`, `value`,
/// `build`).
pub(crate) fn sdk_tags<T, E: std::fmt::Display>(
    type_name: &str,
    tags: impl IntoIterator<Item = (String, String)>,
    build: impl Fn(&str, &str) -> Result<T, E>,
) -> Result<Vec<T>, ProviderError> {
    tags.into_iter()
        .map(|(k, v)| build(&k, &v).map_err(|e| invalid(type_name, &format!("tag {k}: {e}"))))
        .collect()
}

/// What turns one set of tags into another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TagChanges {
    /// The keys to remove, sorted.
    pub removed: Vec<String>,
    /// The tags to add or change, sorted by key.
    pub changed: Vec<(String, String)>,
}

impl TagChanges {
    /// The changes from the tags `old` to the tags `new`.
    pub fn between<'a>(
        old: impl IntoIterator<Item = (&'a String, &'a String)>,
        new: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> TagChanges {
        let old: BTreeMap<&String, &String> = old.into_iter().collect();
        let new: BTreeMap<&String, &String> = new.into_iter().collect();
        TagChanges {
            removed: old
                .keys()
                .filter(|k| !new.contains_key(*k))
                .map(|k| (*k).clone())
                .collect(),
            changed: new
                .iter()
                .filter(|(k, v)| old.get(*k) != Some(*v))
                .map(|(k, v)| ((*k).clone(), (*v).clone()))
                .collect(),
        }
    }
}

/// A service's tagging calls, from which [`Tagging::sync_tags`] turns one set of tags into
/// another.
pub(crate) trait Tagging: Sync {
    /// Removes the tags `keys` from the resource `id`.
    async fn untag(&self, id: &str, keys: Vec<String>) -> Result<(), ProviderError>;

    /// Adds or changes the tags `tags` (sorted by key) of the resource `id`.
    async fn tag(&self, id: &str, tags: Vec<(String, String)>) -> Result<(), ProviderError>;

    /// Makes the tags of the resource `id` `new`, given the `old` ones: untags the removed
    /// keys, then tags the added or changed tags, each only when there is any.
    async fn sync_tags<'a>(
        &self,
        id: &str,
        old: impl IntoIterator<Item = (&'a String, &'a String)>,
        new: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Result<(), ProviderError> {
        let changes = TagChanges::between(old, new);
        if !changes.removed.is_empty() {
            self.untag(id, changes.removed).await?;
        }
        if !changes.changed.is_empty() {
            self.tag(id, changes.changed).await?;
        }
        Ok(())
    }
}

/// Implements [`Tagging`] for an SDK provider from its two calls: the untag call's name and
/// request (made from the provider's client, the resource id and the keys), the tag call's
/// name and request (from the client, the id and the tags), and how its errors are
/// classified (e.g. [`ProviderError::from_sdk`]). A request is made once and sent again as
/// long as [`call_classified`](super::call_classified) retries.
macro_rules! tagging {
    (
        $provider:ty, $classify:expr,
        $untag:literal => |$uc:ident, $uid:ident, $keys:ident| $untag_request:expr,
        $tag:literal => |$tc:ident, $tid:ident, $tags:ident| $tag_request:expr $(,)?
    ) => {
        impl $crate::sdk::common::Tagging for $provider {
            async fn untag(
                &self,
                $uid: &str,
                $keys: Vec<String>,
            ) -> Result<(), $crate::error::ProviderError> {
                let $uc = &self.client;
                let request = $untag_request;
                $crate::sdk::common::calls::send_request(
                    &self.retry,
                    $untag,
                    $classify,
                    request,
                    |r| r.send(),
                )
                .await
            }

            async fn tag(
                &self,
                $tid: &str,
                $tags: Vec<(String, String)>,
            ) -> Result<(), $crate::error::ProviderError> {
                let $tc = &self.client;
                let request = $tag_request;
                $crate::sdk::common::calls::send_request(
                    &self.retry,
                    $tag,
                    $classify,
                    request,
                    |r| r.send(),
                )
                .await
            }
        }
    };
}
pub(crate) use tagging;

/// Puts `tags` into `state` the way templates write them, a `Key`/`Value` list sorted by
/// key, when there are any; the stack's marks ([`super::marks`]) are left out.
pub(crate) fn insert_tags(
    state: &mut Properties,
    tags: impl IntoIterator<Item = (String, String)>,
) {
    let mut tags: Vec<(String, String)> = tags
        .into_iter()
        .filter(|(k, _)| !super::marks::is_mark(k))
        .collect();
    tags.sort();
    if !tags.is_empty() {
        let list = tags
            .into_iter()
            .map(|(k, v)| json!({"Key": k, "Value": v}))
            .collect();
        state.insert("Tags".into(), Value::Array(list));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn tags_parse_diff_and_list() {
        let p = props(
            json!({"Tags": [{"Key": "b", "Value": 2}, {"Key": "a", "Value": "1"},
            {"Key": "c"}]}),
        );
        let map = tag_map(&p);
        assert_eq!(map.len(), 2);
        assert_eq!(map.get("b").map(String::as_str), Some("2"));
        let pairs = tag_pairs("T", &p).unwrap_or_default();
        assert_eq!(pairs[2], ("c".to_string(), String::new()));
        assert!(tag_pairs("T", &props(json!({"Tags": {"a": 1}}))).is_err());
        assert!(tag_pairs("T", &props(json!({"Tags": [{"Value": 1}]}))).is_err());

        let old: BTreeMap<String, String> =
            [("a".into(), "1".into()), ("gone".into(), "x".into())].into();
        let changes = TagChanges::between(&old, &map);
        assert_eq!(changes.removed, ["gone"]);
        assert_eq!(changes.changed, [("b".to_string(), "2".to_string())]);

        let mut state = Properties::new();
        insert_tags(&mut state, Vec::new());
        assert!(state.is_empty());
        insert_tags(&mut state, map);
        assert_eq!(
            state["Tags"],
            json!([{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}])
        );
    }
}
