//! Appends to one stream written together: the appends a process makes to a stream at
//! once wait in its lane, and one writer at a time takes them from the front, as many as
//! one page holds, and writes them at consecutive positions in one `TransactWriteItems`.
//! The lane remembers the last position this process wrote, so a stream only this
//! process writes to costs one request per transaction.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::append::{Pending, Written};
use super::bodies::Body;
use super::locks::{LockOp, holder_of};
use super::pages;
use super::{DynamoStore, Item, LOCK_SK, MAX_ATTEMPTS, MAX_CONTENTION, get_n, get_s, key_sk};
use crate::event::{self, Holder, NewEvent};
use crate::store::{Appended, Precondition, StoreError, StoreResult, StreamId};

/// The appends of this process to one stream, waiting to be written.
#[derive(Debug, Default)]
pub(super) struct Lane {
    queue: Mutex<VecDeque<Request>>,
    /// Held by the one writing the queue; the last position this process wrote or read
    /// (`None`: read the counter first).
    writer: tokio::sync::Mutex<Option<u64>>,
}

/// One append, waiting in a lane.
#[derive(Debug)]
struct Request {
    key: String,
    digest: String,
    type_name: &'static str,
    json: String,
    pre: Precondition,
    /// Set on the appends of one [`DynamoStore::append_events_in_order`] call, but the
    /// last: the next request of the queue belongs with this one, in the same transaction.
    joined: bool,
    reply: oneshot::Sender<StoreResult<Appended>>,
}

impl Request {
    fn answer(self, outcome: StoreResult<Appended>) {
        // The appender may have stopped waiting: nobody to tell.
        let _ = self.reply.send(outcome);
    }
}

impl Lane {
    /// The appends at the front of the queue that one transaction can write: the same
    /// precondition (one that takes or releases the lock goes alone), no key twice, and
    /// what one page holds ([`pages::fits`]).
    fn next_batch(&self) -> Vec<Request> {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let Some(first) = queue.pop_front() else {
            return Vec::new();
        };
        let alone = matches!(
            first.pre,
            Precondition::TakeLock(_) | Precondition::ReleaseLock(_) | Precondition::FenceLock(_)
        );
        let mut bytes = pages::inline_bytes(&first.json);
        let mut keys = HashSet::from([first.key.clone()]);
        let mut batch = vec![first];
        if alone {
            return batch;
        }
        // The appends of one ordered call go together (their size was checked when they
        // were queued), the first of them in front or after compatible appends.
        let mut joined = batch[0].joined;
        while let Some(next) = queue.front() {
            if !joined {
                let group = queue
                    .iter()
                    .position(|r| !r.joined)
                    .map_or(queue.len(), |i| i + 1);
                let more: usize = queue
                    .iter()
                    .take(group)
                    .map(|r| pages::inline_bytes(&r.json))
                    .sum();
                let fits = queue
                    .iter()
                    .take(group)
                    .all(|r| follows(&batch[0].pre, &r.pre) && !keys.contains(&r.key))
                    && pages::fits(batch.len() + group - 1, bytes, more);
                if !fits || (group == 1 && next.pre != batch[0].pre) {
                    break;
                }
            }
            let Some(next) = queue.pop_front() else { break };
            joined = next.joined;
            bytes += pages::inline_bytes(&next.json);
            keys.insert(next.key.clone());
            let closes = matches!(next.pre, Precondition::ReleaseLock(_));
            batch.push(next);
            if closes {
                break;
            }
        }
        batch
    }
}

/// Whether an append under `next` may be written in the transaction of appends under
/// `first`: the same precondition, or the release of the lock they hold (which then ends
/// the transaction).
fn follows(first: &Precondition, next: &Precondition) -> bool {
    match (first, next) {
        (Precondition::HoldsLock(held), Precondition::ReleaseLock(released)) => held == released,
        _ => first == next,
    }
}

/// What a transaction of `batch` does with the lock, as a precondition and whether a
/// release is strict: appends under the lock followed by its release delete the lock only
/// while this run holds it (a release alone also succeeds on a free lock; the appends
/// before it may not).
fn lock_pre(batch: &[Request]) -> (Precondition, bool) {
    match (batch.first(), batch.last()) {
        (Some(first), Some(last)) => {
            let strict = batch.len() > 1
                && matches!(first.pre, Precondition::HoldsLock(_))
                && matches!(last.pre, Precondition::ReleaseLock(_));
            (last.pre.clone(), strict)
        }
        _ => (Precondition::None, false),
    }
}

/// The lock operation of [`lock_pre`]'s answer.
fn lock_op(pre: &Precondition, strict: bool) -> LockOp<'_> {
    match pre {
        Precondition::ReleaseLock(id) if strict => LockOp::Break(id),
        pre => LockOp::from(pre),
    }
}

impl DynamoStore {
    /// The lane of stream `pk`.
    fn lane(&self, pk: &str) -> Arc<Lane> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        lanes.entry(pk.to_string()).or_default().clone()
    }

    pub(super) async fn append_event(
        &self,
        stream: &StreamId,
        new: &NewEvent,
        pre: &Precondition,
    ) -> StoreResult<Appended> {
        let mut answers = self.enqueue(stream, &[(new.clone(), pre.clone())]);
        answers.remove(0).await.unwrap_or_else(|_| Err(stopped()))
    }

    /// Appends `events` in one transaction when they are appends under the lock, maybe
    /// followed by its release, and fit one page; otherwise one by one (see
    /// [`EventStore::append_in_order`](crate::store::EventStore::append_in_order)).
    pub(super) async fn append_events_in_order(
        &self,
        stream: &StreamId,
        events: &[(NewEvent, Precondition)],
    ) -> StoreResult<Vec<Appended>> {
        if !one_transaction(events) {
            let mut appended = Vec::with_capacity(events.len());
            for (event, pre) in events {
                appended.push(self.append_event(stream, event, pre).await?);
            }
            return Ok(appended);
        }
        let mut appended = Vec::with_capacity(events.len());
        for answer in self.enqueue(stream, events) {
            appended.push(answer.await.unwrap_or_else(|_| Err(stopped()))?);
        }
        Ok(appended)
    }

    /// Puts `events` at the back of their stream's lane, in order and together (several
    /// are joined: one transaction writes them all), and starts writing the lane; returns
    /// where each append's answer comes.
    fn enqueue(
        &self,
        stream: &StreamId,
        events: &[(NewEvent, Precondition)],
    ) -> Vec<oneshot::Receiver<StoreResult<Appended>>> {
        let pk = stream.key();
        let lane = self.lane(&pk);
        let mut answers = Vec::with_capacity(events.len());
        {
            let mut queue = lane.queue.lock().unwrap_or_else(|e| e.into_inner());
            for (i, (new, pre)) in events.iter().enumerate() {
                let body = new.event.to_body();
                let (reply, answer) = oneshot::channel();
                queue.push_back(Request {
                    key: new.key.clone(),
                    digest: event::digest(&body),
                    type_name: new.event.type_name(),
                    json: serde_json::to_string(&body).expect("events serialize"),
                    pre: pre.clone(),
                    joined: i + 1 < events.len(),
                    reply,
                });
                answers.push(answer);
            }
        }
        // The writing runs in a task of its own: an appender that stops waiting must not
        // cut short a transaction that holds other appenders' events. The append waits
        // for its answer only, not for that task, which may go on writing later appends.
        let store = self.clone();
        tokio::spawn(async move { store.drain(&pk, &lane).await });
        answers
    }

    /// Writes the lane's queue until it is empty, one transaction at a time.
    async fn drain(&self, pk: &str, lane: &Lane) {
        let mut last = lane.writer.lock().await;
        loop {
            let batch = lane.next_batch();
            if batch.is_empty() {
                return;
            }
            self.commit(pk, batch, &mut last).await;
        }
    }

    /// Writes `batch` (appends of one precondition, or appends under the lock followed by
    /// its release) at the positions after `last`,
    /// answering each append; `last` is the stream's end after it, when known.
    async fn commit(&self, pk: &str, mut batch: Vec<Request>, last: &mut Option<u64>) {
        let mut contention = 0;
        let mut refused = 1;
        while !batch.is_empty() {
            // Again each time: a retried transaction may have fewer appends.
            let (pre, strict) = lock_pre(&batch);
            let lock = lock_op(&pre, strict);
            let prev = match *last {
                Some(prev) => prev,
                None => match self.last_seq(pk).await {
                    Ok(prev) => prev,
                    Err(e) => return fail(batch, &e),
                },
            };
            let bodies = match self.place_bodies(pk, prev, &batch).await {
                Ok(bodies) => bodies,
                Err(e) => return fail(batch, &e),
            };
            let pending: Vec<Pending<'_>> = batch
                .iter()
                .zip(&bodies)
                .zip(prev + 1..)
                .map(|((r, body), seq)| Pending {
                    pk,
                    seq,
                    key: &r.key,
                    digest: &r.digest,
                    type_name: r.type_name,
                    body,
                })
                .collect();
            let written = self.write_events(&pending, lock).await;
            drop(pending);
            // The bodies put in S3 are deleted only when the events are known not to be
            // written: after an error that leaves it unknown, an object may be the body
            // of a stored event.
            match written {
                Ok(Written::Done) => {
                    *last = Some(prev + batch.len() as u64);
                    for (request, seq) in batch.into_iter().zip(prev + 1..) {
                        request.answer(Ok(Appended::New(seq)));
                    }
                    return;
                }
                Ok(Written::KeysTaken(taken)) => {
                    // Retries (or conflicts): each is answered from where its key is, and
                    // the others are written again. A key at the very position this
                    // transaction gave it means an earlier attempt of it was carried out
                    // (its answer lost): every body is then a stored event's.
                    *last = None;
                    let mut carried_out = false;
                    for (i, item) in taken.into_iter().rev() {
                        let request = batch.remove(i);
                        let seq = prev + 1 + i as u64;
                        let outcome = self.taken(pk, &request, seq, item).await;
                        carried_out |= matches!(outcome, Ok(Appended::New(_)));
                        request.answer(outcome);
                    }
                    if !carried_out {
                        self.discard_bodies(&bodies).await;
                    }
                }
                Ok(Written::Moved) => {
                    self.discard_bodies(&bodies).await;
                    *last = None;
                    contention += 1;
                    if contention >= MAX_CONTENTION {
                        let e = StoreError::Backend(format!(
                            "DynamoDB table {}: {pk}: {MAX_CONTENTION} other appenders took \
                             the next position first; giving up",
                            self.table
                        ));
                        return fail(batch, &e);
                    }
                    self.contention_pause(contention).await;
                }
                Ok(Written::LockRefused(item)) => {
                    self.discard_bodies(&bodies).await;
                    let item = match item {
                        Some(item) => Some(item),
                        None => match self.get(pk, LOCK_SK).await {
                            Ok(item) => item,
                            Err(e) => return fail(batch, &e),
                        },
                    };
                    let holder = match holder_of(item.as_ref()) {
                        Ok(holder) => holder,
                        Err(e) => return fail(batch, &e),
                    };
                    if lock.allows(holder.as_ref()) && refused < MAX_ATTEMPTS {
                        // The lock changed between the transaction and the read: again.
                        self.backoff(refused).await;
                        refused += 1;
                        continue;
                    }
                    return fail(batch, &refusal(lock, holder, &self.table, pk));
                }
                Err(e) => {
                    *last = None;
                    return fail(batch, &e);
                }
            }
        }
    }

    /// Remembers `seq` as the end of stream `pk`, read (not written) by this process,
    /// unless the lane knows a later one or is writing: a hint for the next transaction,
    /// which reads the counter when it is wrong.
    pub(super) fn hint_end(&self, pk: &str, seq: u64) {
        let lane = self.lane(pk);
        if let Ok(mut last) = lane.writer.try_lock()
            && last.is_none_or(|known| known < seq)
        {
            *last = Some(seq);
        }
    }

    /// The bodies of `batch` at the positions after `prev`: inline, or put in S3 when too
    /// large for an item (those put are deleted again when one fails).
    async fn place_bodies(&self, pk: &str, prev: u64, batch: &[Request]) -> StoreResult<Vec<Body>> {
        let mut bodies = Vec::with_capacity(batch.len());
        for (request, seq) in batch.iter().zip(prev + 1..) {
            match self
                .place_body(pk, "events", seq, request.json.clone())
                .await
            {
                Ok(body) => bodies.push(body),
                Err(e) => {
                    self.discard_bodies(&bodies).await;
                    return Err(e);
                }
            }
        }
        Ok(bodies)
    }

    /// Deletes the bodies put in S3 for events not written.
    async fn discard_bodies(&self, bodies: &[Body]) {
        for body in bodies {
            self.discard_body(body).await;
        }
    }

    /// The outcome of an append whose key is taken (the `k#` item, when the cancellation
    /// reason held it). When the key points at the position this attempt gave the event,
    /// with its digest, an earlier attempt of the same transaction wrote it (the SDK
    /// repeats a request whose answer was lost): that is a success.
    async fn taken(
        &self,
        pk: &str,
        request: &Request,
        seq: u64,
        found: Option<Item>,
    ) -> StoreResult<Appended> {
        let item = match found {
            Some(item) => item,
            None => self.get(pk, &key_sk(&request.key)).await?.ok_or_else(|| {
                StoreError::Backend(format!(
                    "DynamoDB table {}: an append of key `{}` was cancelled because the key \
                     exists, and it does not",
                    self.table, request.key
                ))
            })?,
        };
        let at = get_n(&item, "seq").ok_or_else(|| {
            StoreError::Backend(format!(
                "DynamoDB table {}: the idempotency item of key `{}` has no position",
                self.table, request.key
            ))
        })?;
        if get_s(&item, "digest") != Some(request.digest.as_str()) {
            return Err(StoreError::Conflict {
                key: request.key.clone(),
            });
        }
        Ok(if at == seq {
            Appended::New(at)
        } else {
            Appended::AlreadyThere(at)
        })
    }
}

/// Whether `events` can go in one transaction: two or more appends holding one run's
/// lock, the last maybe releasing it, with distinct keys, that fit one page.
fn one_transaction(events: &[(NewEvent, Precondition)]) -> bool {
    let Some(((_, Precondition::HoldsLock(id)), rest)) = events.split_first() else {
        return false;
    };
    let mut bytes = 0;
    let mut keys = HashSet::new();
    events.len() > 1
        && rest.iter().enumerate().all(|(i, (_, pre))| match pre {
            Precondition::HoldsLock(other) => other == id,
            Precondition::ReleaseLock(other) => other == id && i + 2 == events.len(),
            _ => false,
        })
        && events.iter().enumerate().all(|(i, (new, _))| {
            let json = serde_json::to_string(&new.event.to_body()).expect("events serialize");
            let more = pages::inline_bytes(&json);
            let fits = pages::fits(i, bytes, more);
            bytes += more;
            fits && keys.insert(new.key.as_str())
        })
}

/// The answer of an append whose writing task stopped first.
fn stopped() -> StoreError {
    StoreError::Backend("the task writing this append stopped before it answered".into())
}

/// Answers every append of `batch` with `error`.
fn fail(batch: Vec<Request>, error: &StoreError) {
    for request in batch {
        request.answer(Err(error.clone()));
    }
}

/// The error of an append whose lock condition failed for good.
fn refusal(lock: LockOp<'_>, holder: Option<Holder>, table: &str, pk: &str) -> StoreError {
    match (lock, holder) {
        (LockOp::Take(_), Some(holder)) => StoreError::Locked {
            holder: Box::new(holder),
        },
        (LockOp::CheckOpen(id), Some(holder)) if holder.deploy_id == id => StoreError::Fenced {
            deploy_id: id.to_string(),
        },
        (
            LockOp::Check(id)
            | LockOp::CheckOpen(id)
            | LockOp::Fence(id)
            | LockOp::Release(id)
            | LockOp::Break(id),
            holder,
        ) => StoreError::NotHolder {
            deploy_id: id.to_string(),
            holder: holder.map(Box::new),
        },
        (_, holder) => StoreError::Backend(format!(
            "DynamoDB table {table}: the lock of {pk} keeps changing (now {holder:?})"
        )),
    }
}
