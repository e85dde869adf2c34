//! Pages: the events one transaction writes, kept together in one item.
//!
//! A transaction writes its events at consecutive positions `first..=last` as one item,
//! the page, under the sort key of its last position (`e#<last>`), with the events in its
//! `events` list, each with its own position. So a query of the sort keys from `e#<n>` on
//! finds the page that holds position `n` (its last is `n` or more) and every later one;
//! the events below `n` on the first page are left out. An item of the range without
//! `events` is one event, as versions before pages wrote them: a page of one.
//!
//! A page holds at most [`MAX_PAGE_EVENTS`] events and [`PAGE_BODY_BYTES`] of inline
//! bodies (or one event, whose inline body is within [`INLINE_BODY_LIMIT`]): with each
//! event's key item, the counter, the lock and the registry, a transaction stays within
//! `TransactWriteItems`' 100 items, and the page within an item's 400 KiB.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::append::Pending;
use super::bodies::Body;
use super::{DynamoStore, EVENT_PREFIX, INLINE_BODY_LIMIT, Item, get_n, n, s, seq_sk};
use crate::event;
use crate::store::{StoreResult, StreamId};

/// Most events in a page (one transaction): each has a key item, and the transaction
/// also holds the page, the counter, the lock and the registry item.
pub(super) const MAX_PAGE_EVENTS: usize = 96;

/// Most bytes of inline bodies in a page of more than one event: with the entries' other
/// attributes (about 300 bytes each), within an item's 400 KiB.
const PAGE_BODY_BYTES: usize = 320 * 1024;

/// The list attribute of a page's events.
const EVENTS: &str = "events";
/// The attribute of a page's first position.
const FIRST: &str = "first";
/// The attribute of a page's revision: how many times it was rewritten.
pub(super) const REVISION: &str = "rev";

/// How many bytes an event's body takes in its page: its JSON, unless the body goes to S3.
pub(super) fn inline_bytes(json: &str) -> usize {
    if json.len() > INLINE_BODY_LIMIT {
        0
    } else {
        json.len()
    }
}

/// True when a page of `events` with `bytes` of inline bodies may take one more of `more`
/// bytes (the first event always fits: its inline body is within [`INLINE_BODY_LIMIT`]).
pub(super) fn fits(events: usize, bytes: usize, more: usize) -> bool {
    events == 0 || (events < MAX_PAGE_EVENTS && bytes + more <= PAGE_BODY_BYTES)
}

/// The page item holding `events` (consecutive positions, the same stream).
pub(super) fn page_item(events: &[Pending<'_>]) -> Item {
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Item::new();
    };
    HashMap::from([
        ("pk".to_string(), s(first.pk)),
        ("sk".to_string(), s(&seq_sk(EVENT_PREFIX, last.seq))),
        ("seq".to_string(), n(last.seq)),
        (FIRST.to_string(), n(first.seq)),
        (
            EVENTS.to_string(),
            AttributeValue::L(events.iter().map(|e| AttributeValue::M(entry(e))).collect()),
        ),
    ])
}

/// One event's entry in its page.
fn entry(event: &Pending<'_>) -> Item {
    let mut entry: Item = HashMap::from([
        ("seq".to_string(), n(event.seq)),
        ("key".to_string(), s(event.key)),
        ("type".to_string(), s(event.type_name)),
        (
            "v".to_string(),
            n(u64::from(event::current_version(event.type_name))),
        ),
        ("at".to_string(), s(&event::now())),
        ("digest".to_string(), s(event.digest)),
    ]);
    set_body(&mut entry, event.body);
    entry
}

/// Puts `body` in an event's entry (or single-event item), in place of the one it had.
pub(super) fn set_body(entry: &mut Item, body: &Body) {
    entry.remove("body");
    entry.remove("body_s3");
    match body {
        Body::Inline(json) => entry.insert("body".to_string(), s(json)),
        Body::S3(key) => entry.insert("body_s3".to_string(), s(key)),
    };
}

/// What is wrong with a page item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum MalformedPage {
    #[error("a page's `events` is not a list")]
    NotAList,
    #[error("an entry of a page's `events` is not a map")]
    NotAMap,
}

/// The events an item of the `e#` range holds: a page's entries, or the item itself.
pub(super) fn entries(item: &Item) -> Result<Vec<&Item>, MalformedPage> {
    let Some(list) = item.get(EVENTS) else {
        return Ok(vec![item]);
    };
    let list = list.as_l().map_err(|_| MalformedPage::NotAList)?;
    list.iter()
        .map(|entry| entry.as_m().map_err(|_| MalformedPage::NotAMap))
        .collect()
}

/// The entry of position `seq` in an item that holds it ([`span`]).
pub(super) fn entry_at(item: &Item, seq: u64) -> Option<&Item> {
    if !item.contains_key(EVENTS) {
        return Some(item);
    }
    entries(item)
        .ok()?
        .into_iter()
        .find(|entry| get_n(entry, "seq") == Some(seq))
}

/// The entry of position `seq` in an item that holds it, to change it.
pub(super) fn entry_at_mut(item: &mut Item, seq: u64) -> Option<&mut Item> {
    if !item.contains_key(EVENTS) {
        return Some(item);
    }
    let Some(AttributeValue::L(list)) = item.get_mut(EVENTS) else {
        return None;
    };
    list.iter_mut().find_map(|entry| match entry {
        AttributeValue::M(map) if get_n(map, "seq") == Some(seq) => Some(map),
        _ => None,
    })
}

/// The positions an item of the `e#` range holds.
pub(super) fn span(item: &Item) -> Option<(u64, u64)> {
    let last = get_n(item, "seq")?;
    Some((get_n(item, FIRST).unwrap_or(last), last))
}

impl DynamoStore {
    /// The item (page or single event) that holds position `seq` of `stream`, read
    /// consistently: the first item of the range from `e#<seq>` on, if it covers `seq`.
    pub(super) async fn page_holding(
        &self,
        stream: &StreamId,
        seq: u64,
    ) -> StoreResult<Option<Item>> {
        let out = self
            .retrying(|| {
                self.db
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("pk = :pk AND sk BETWEEN :first AND :last")
                    .expression_attribute_values(":pk", s(&stream.key()))
                    .expression_attribute_values(":first", s(&seq_sk(EVENT_PREFIX, seq)))
                    .expression_attribute_values(":last", s(&seq_sk(EVENT_PREFIX, u64::MAX)))
                    .consistent_read(true)
                    .limit(1)
                    .send()
            })
            .await
            .map_err(|e| self.backend("Query (the page of an event)", &e))?;
        Ok(out
            .items
            .unwrap_or_default()
            .into_iter()
            .next()
            .filter(|item| span(item).is_some_and(|(first, last)| first <= seq && seq <= last)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending<'a>(seq: u64, key: &'a str, body: &'a Body) -> Pending<'a> {
        Pending {
            pk: "us-east-1/app",
            seq,
            key,
            digest: "d",
            type_name: "ResourceCreated",
            body,
        }
    }

    #[test]
    fn a_page_is_keyed_by_its_last_position_and_holds_each_event() {
        let inline = Body::Inline("{}".into());
        let big = Body::S3("us-east-1/app/events/00000000000000000008-ab.json".into());
        let events = [pending(7, "a", &inline), pending(8, "b", &big)];
        let page = page_item(&events);
        assert_eq!(page["sk"], s("e#00000000000000000008"));
        assert_eq!(span(&page), Some((7, 8)));
        let held = entries(&page).unwrap();
        assert_eq!(held.len(), 2);
        assert_eq!(get_n(held[0], "seq"), Some(7));
        assert_eq!(held[0]["body"], s("{}"));
        assert_eq!(get_n(held[1], "seq"), Some(8));
        assert!(!held[1].contains_key("body"));
        assert!(held[1].contains_key("body_s3"));
        assert_eq!(entry_at(&page, 8), Some(held[1]));
        assert_eq!(entry_at(&page, 9), None);

        let mut page = page;
        set_body(
            entry_at_mut(&mut page, 8).unwrap(),
            &Body::Inline("[]".into()),
        );
        let held = entries(&page).unwrap();
        assert_eq!(held[1]["body"], s("[]"));
        assert!(!held[1].contains_key("body_s3"));
        assert_eq!(held[0]["body"], s("{}"));
    }

    #[test]
    fn an_item_without_events_is_a_page_of_one() {
        let item: Item = HashMap::from([
            ("sk".to_string(), s("e#00000000000000000003")),
            ("seq".to_string(), n(3)),
            ("body".to_string(), s("{}")),
        ]);
        assert_eq!(span(&item), Some((3, 3)));
        assert_eq!(entries(&item).unwrap(), vec![&item]);
        assert_eq!(entry_at(&item, 3), Some(&item));
    }

    #[test]
    fn a_page_stops_at_its_count_or_its_bytes() {
        assert!(fits(0, 0, INLINE_BODY_LIMIT));
        assert!(!fits(MAX_PAGE_EVENTS, 0, 1));
        assert!(fits(MAX_PAGE_EVENTS - 1, 0, 1));
        assert!(!fits(1, PAGE_BODY_BYTES, 1));
        assert!(fits(1, PAGE_BODY_BYTES - 1, 1));
        assert_eq!(inline_bytes(&"x".repeat(INLINE_BODY_LIMIT + 1)), 0);
        assert_eq!(inline_bytes("{}"), 2);
    }
}
