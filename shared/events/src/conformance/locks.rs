//! The stack's lock: taking, holding, releasing and breaking it: part of the conformance suite (see the module root).

use super::*;

/// The stack's lock admits one deploy at a time; the holder may append under it, retry
/// taking it and release it.
pub async fn lock_is_exclusive<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "lock");
    let h1 = holder("d1");
    let h2 = holder("d2");
    let take1 = NewEvent::new("d1/start", deploy_started("d1"));
    let take2 = NewEvent::new("d2/start", deploy_started("d2"));

    ok(
        store
            .append(&stream, &take1, &Precondition::TakeLock(h1.clone()))
            .await,
        "TakeLock on a free lock",
    );
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder"),
        Some(h1.clone()),
        "the lock must be held by the deploy that took it"
    );

    match store
        .append(&stream, &take2, &Precondition::TakeLock(h2.clone()))
        .await
    {
        Err(StoreError::Locked { holder }) => {
            assert_eq!(*holder, h1, "Locked must name the holder")
        }
        other => panic!("TakeLock on a held lock must be Locked, got {other:?}"),
    }
    assert_eq!(
        count(store, &stream).await,
        1,
        "a refused TakeLock must append nothing"
    );

    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d1/lock-again", Event::LockTaken { holder: h1.clone() }),
                &Precondition::TakeLock(h1.clone()),
            )
            .await,
        "TakeLock by the deploy already holding the lock (another key)",
    );
    ok(
        store
            .append(
                &stream,
                &NewEvent::new(
                    "d1/Bucket/create/done",
                    resource_created("d1", "Bucket", "b"),
                ),
                &Precondition::HoldsLock("d1".into()),
            )
            .await,
        "HoldsLock by the holder",
    );
    match store
        .append(
            &stream,
            &NewEvent::new(
                "d2/Bucket/create/done",
                resource_created("d2", "Bucket", "b"),
            ),
            &Precondition::HoldsLock("d2".into()),
        )
        .await
    {
        Err(StoreError::NotHolder { deploy_id, holder }) => {
            assert_eq!(deploy_id, "d2", "NotHolder must name the deploy");
            assert_eq!(
                holder.map(|h| *h),
                Some(h1.clone()),
                "NotHolder must name the holder"
            );
        }
        other => panic!("HoldsLock by another deploy must be NotHolder, got {other:?}"),
    }
    assert_eq!(
        count(store, &stream).await,
        3,
        "a refused HoldsLock must append nothing"
    );

    let release = release_event("d1/done", "d1");
    let released = ok(
        store
            .append(&stream, &release, &Precondition::ReleaseLock("d1".into()))
            .await,
        "ReleaseLock by the holder",
    );
    assert!(
        matches!(released, Appended::New(_)),
        "ReleaseLock must append, got {released:?}"
    );
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder"),
        None,
        "ReleaseLock must free the lock"
    );
    assert_eq!(
        ok(
            store
                .append(&stream, &release, &Precondition::ReleaseLock("d1".into()))
                .await,
            "retried ReleaseLock",
        ),
        Appended::AlreadyThere(released.seq()),
        "a retried ReleaseLock (same key) must be a no-op"
    );
    match store
        .append(
            &stream,
            &NewEvent::new("d1/late", resource_created("d1", "Late", "l")),
            &Precondition::HoldsLock("d1".into()),
        )
        .await
    {
        Err(StoreError::NotHolder { deploy_id, holder }) => {
            assert_eq!(deploy_id, "d1", "NotHolder must name the deploy");
            assert_eq!(holder, None, "nobody holds the released lock");
        }
        other => panic!("HoldsLock after the release must be NotHolder, got {other:?}"),
    }
    ok(
        store
            .append(
                &stream,
                &release_event("d1/release-again", "d1"),
                &Precondition::ReleaseLock("d1".into()),
            )
            .await,
        "ReleaseLock (another key) on a free lock",
    );

    // The refused append left no trace: its key is free for the deploy now.
    let taken = ok(
        store
            .append(&stream, &take2, &Precondition::TakeLock(h2.clone()))
            .await,
        "TakeLock of the freed lock with the key refused before",
    );
    assert!(
        matches!(taken, Appended::New(_)),
        "the key of a refused append must stay free, got {taken:?}"
    );
    match store
        .append(
            &stream,
            &release_event("d1/release-late", "d1"),
            &Precondition::ReleaseLock("d1".into()),
        )
        .await
    {
        Err(StoreError::NotHolder { deploy_id, holder }) => {
            assert_eq!(deploy_id, "d1", "NotHolder must name the deploy");
            assert_eq!(
                holder.map(|h| *h),
                Some(h2.clone()),
                "NotHolder must name the holder"
            );
        }
        other => panic!("ReleaseLock of another deploy's lock must be NotHolder, got {other:?}"),
    }
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder"),
        Some(h2.clone()),
        "a refused ReleaseLock must keep the lock"
    );
    assert_eq!(
        keys(&ok(store.read(&stream, 0).await, "read")),
        [
            "d1/start",
            "d1/lock-again",
            "d1/Bucket/create/done",
            "d1/done",
            "d1/release-again",
            "d2/start",
        ],
        "the stream after the lock sequence"
    );

    // Many deploys race for one free lock: exactly one wins.
    let race = self::stream(prefix, "lock-race");
    let racers = 10;
    let race_stream = &race;
    let attempts = (0..racers).map(move |i| {
        let deploy = format!("race-{i}");
        let event = NewEvent::new(format!("{deploy}/start"), deploy_started(&deploy));
        let pre = Precondition::TakeLock(holder(&deploy));
        async move { store.append(race_stream, &event, &pre).await }
    });
    let results = join_all(attempts.collect()).await;
    let winners: Vec<usize> = (0..racers).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one of {racers} concurrent TakeLocks must win: {results:?}"
    );
    let winner = holder(&format!("race-{}", winners[0]));
    for (i, result) in results.iter().enumerate() {
        match result {
            Ok(_) => {}
            Err(StoreError::Locked { holder }) => assert_eq!(
                **holder, winner,
                "racer {i} was refused naming another holder than the winner"
            ),
            Err(e) => panic!("racer {i} must be refused with Locked, got {e:?}"),
        }
    }
    assert_eq!(
        ok(store.lock_holder(&race).await, "lock_holder after the race"),
        Some(winner.clone()),
        "the winner must hold the lock"
    );
    let read = ok(store.read(&race, 0).await, "read after the race");
    assert_eq!(
        keys(&read),
        [format!("{}/start", winner.deploy_id)],
        "only the winner's event must be appended"
    );
}

/// Breaking a held lock frees it and records who broke it; breaking a free lock does
/// nothing.
pub async fn broken_lock<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "broken-lock");
    let h1 = holder("d1");
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d1/start", deploy_started("d1")),
                &Precondition::TakeLock(h1.clone()),
            )
            .await,
        "TakeLock",
    );
    let broken = ok(
        store.break_lock(&stream, "admin@laptop").await,
        "break_lock of a held lock",
    );
    assert_eq!(
        broken,
        Some(h1.clone()),
        "break_lock must return the holder"
    );
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder"),
        None,
        "break_lock must free the lock"
    );
    let read = ok(store.read(&stream, 0).await, "read");
    assert_eq!(read.len(), 2, "break_lock must append one event: {read:#?}");
    assert_eq!(
        read[1].event,
        Event::LockBroken {
            by: "admin@laptop".into(),
            previous: h1.clone(),
        },
        "break_lock must append LockBroken naming who broke it and the holder"
    );

    // The broken deploy can no longer append; another can take the lock.
    match store
        .append(
            &stream,
            &NewEvent::new(
                "d1/Bucket/create/done",
                resource_created("d1", "Bucket", "b"),
            ),
            &Precondition::HoldsLock("d1".into()),
        )
        .await
    {
        Err(StoreError::NotHolder { holder: None, .. }) => {}
        other => panic!("the deploy whose lock was broken must be NotHolder, got {other:?}"),
    }
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d2/start", deploy_started("d2")),
                &Precondition::TakeLock(holder("d2")),
            )
            .await,
        "TakeLock after break_lock",
    );

    let free = self::stream(prefix, "free-lock");
    ok(
        store
            .append(
                &free,
                &NewEvent::new(
                    "d3/Bucket/create/done",
                    resource_created("d3", "Bucket", "b"),
                ),
                &Precondition::None,
            )
            .await,
        "append without the lock",
    );
    assert_eq!(
        ok(
            store.break_lock(&free, "admin@laptop").await,
            "break_lock of a free lock"
        ),
        None,
        "break_lock of a free lock must return None"
    );
    assert_eq!(
        count(store, &free).await,
        1,
        "break_lock of a free lock must append nothing"
    );
    assert_eq!(
        ok(
            store
                .break_lock(&self::stream(prefix, "never-written"), "admin@laptop")
                .await,
            "break_lock of an unknown stream",
        ),
        None,
        "break_lock of an unknown stream must return None"
    );
}

/// A lease is renewed by its holder only: the holder's renewal is what
/// [`EventStore::lock_holder`] then reads; a run that does not hold the lock (any more)
/// is told so and changes nothing; after the lock is broken, the old holder's renewal and
/// its next append are both refused (fencing).
pub async fn lease_is_renewed_by_its_holder_only<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "lease");
    let mut h1 = holder("d1");
    h1.expires = Some("2024-05-01T12:02:00.000Z".to_string());
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d1/start", deploy_started("d1")),
                &Precondition::TakeLock(h1.clone()),
            )
            .await,
        "TakeLock with a lease",
    );
    ok(
        store
            .renew_lock(&stream, "d1", "2024-05-01T12:05:00.000Z")
            .await,
        "the holder renews its lease",
    );
    let held = ok(store.lock_holder(&stream).await, "lock_holder").expect("held");
    assert_eq!(held.expires.as_deref(), Some("2024-05-01T12:05:00.000Z"));
    assert_eq!(held.deploy_id, "d1");
    match store
        .renew_lock(&stream, "d2", "2099-01-01T00:00:00.000Z")
        .await
    {
        Err(StoreError::NotHolder { holder, .. }) => {
            assert_eq!(holder.map(|h| h.deploy_id), Some("d1".to_string()))
        }
        other => panic!("a renewal by a run that does not hold the lock: {other:?}"),
    }
    let after = ok(store.lock_holder(&stream).await, "lock_holder").expect("held");
    assert_eq!(
        after.expires, held.expires,
        "a refused renewal changes nothing"
    );

    ok(store.break_lock(&stream, "conformance").await, "break_lock");
    assert!(matches!(
        store
            .renew_lock(&stream, "d1", "2099-01-01T00:00:00.000Z")
            .await,
        Err(StoreError::NotHolder { holder: None, .. })
    ));
    let late = NewEvent::new("d1/R/create/done", resource_created("d1", "R", "p"));
    assert!(
        matches!(
            store
                .append(&stream, &late, &Precondition::HoldsLock("d1".into()))
                .await,
            Err(StoreError::NotHolder { .. })
        ),
        "the old holder's next append is refused"
    );
}

/// Appends in order ([`EventStore::append_in_order`]): a run's last events and the
/// release of its lock land at consecutive positions, in order; called again they are all
/// there already; a run that does not hold the lock appends none of them.
pub async fn ordered_appends_end_a_run<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "ordered");
    let held = |id: &str| Precondition::HoldsLock(id.into());
    let ending = |id: &str| {
        vec![
            (
                NewEvent::new(
                    format!("{id}/Bucket/create/done"),
                    resource_created(id, "Bucket", "b"),
                ),
                held(id),
            ),
            (
                NewEvent::new(
                    format!("{id}/destroyed"),
                    Event::StackDestroyed {
                        deploy_id: id.into(),
                    },
                ),
                held(id),
            ),
            (
                release_event(format!("{id}/released"), id),
                Precondition::ReleaseLock(id.into()),
            ),
        ]
    };
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d1/start", deploy_started("d1")),
                &Precondition::TakeLock(holder("d1")),
            )
            .await,
        "TakeLock",
    );
    let appended = ok(
        store.append_in_order(&stream, &ending("d1")).await,
        "append_in_order",
    );
    assert_eq!(
        appended,
        vec![Appended::New(2), Appended::New(3), Appended::New(4)],
        "ordered appends take consecutive positions, in order"
    );
    let events = ok(store.read(&stream, 0).await, "read");
    assert_eq!(
        keys(&events),
        [
            "d1/start",
            "d1/Bucket/create/done",
            "d1/destroyed",
            "d1/released"
        ],
        "the events are stored in the order given"
    );
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder"),
        None,
        "the last one released the lock"
    );

    let again = ok(
        store.append_in_order(&stream, &ending("d1")).await,
        "append_in_order again",
    );
    assert!(
        again.iter().all(|a| matches!(a, Appended::AlreadyThere(_))) && again.len() == 3,
        "the same ordered appends again are all there already, got {again:?}"
    );

    // Another run holds the lock, then nobody does: none of d3's events is appended.
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d2/start", deploy_started("d2")),
                &Precondition::TakeLock(holder("d2")),
            )
            .await,
        "TakeLock by d2",
    );
    for (what, lock) in [("held by another run", Some(holder("d2"))), ("free", None)] {
        if lock.is_none() {
            ok(
                store
                    .append(
                        &stream,
                        &release_event("d2/released", "d2"),
                        &Precondition::ReleaseLock("d2".into()),
                    )
                    .await,
                "release by d2",
            );
        }
        let before = count(store, &stream).await;
        match store.append_in_order(&stream, &ending("d3")).await {
            Err(StoreError::NotHolder { deploy_id, .. }) => assert_eq!(deploy_id, "d3"),
            other => panic!(
                "ordered appends of a run without the lock ({what}) must be NotHolder, got {other:?}"
            ),
        }
        assert_eq!(
            count(store, &stream).await,
            before,
            "a refused ordered append (lock {what}) appends nothing"
        );
        assert_eq!(
            ok(store.lock_holder(&stream).await, "lock_holder"),
            lock,
            "the lock ({what}) is unchanged"
        );
    }
}

/// A `LockReleased` of run `id` under `key`.
fn release_event(key: impl Into<String>, id: &str) -> NewEvent {
    NewEvent::new(
        key,
        Event::LockReleased {
            deploy_id: id.into(),
        },
    )
}

fn intent(deploy_id: &str, logical_id: &str) -> Event {
    Event::ResourceIntent {
        deploy_id: deploy_id.to_string(),
        logical_id: logical_id.to_string(),
        resource_type: "AWS::SQS::Queue".to_string(),
        operation: crate::event::Operation::Create,
        token: format!("{deploy_id}/{logical_id}"),
        provider: ProviderKind::CloudControl,
        physical_id: None,
        properties: None,
    }
}

/// A fenced lock refuses the intents of new actions ([`Precondition::HoldsOpenLock`]) with
/// [`StoreError::Fenced`], and nothing else: its holder still appends outcomes, retries
/// an intent already stored, fences again and releases the lock. Only the holder fences,
/// and the fence ends with the lock.
pub async fn fenced_lock_refuses_new_actions_only<S: EventStore>(store: &S, prefix: &str) {
    let stream = stream(prefix, "fence");
    let open = Precondition::HoldsOpenLock("d1".into());
    let fence = Precondition::FenceLock("d1".into());
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d1/start", deploy_started("d1")),
                &Precondition::TakeLock(holder("d1")),
            )
            .await,
        "TakeLock",
    );
    let early = NewEvent::new("d1/A/create/intent", intent("d1", "A"));
    ok(
        store.append(&stream, &early, &open).await,
        "an intent under an open lock",
    );
    match store
        .append(
            &stream,
            &NewEvent::new(
                "d2/fence",
                Event::ActionsFenced {
                    deploy_id: "d2".into(),
                },
            ),
            &Precondition::FenceLock("d2".into()),
        )
        .await
    {
        Err(StoreError::NotHolder { deploy_id, .. }) => assert_eq!(deploy_id, "d2"),
        other => panic!("FenceLock by a deploy that does not hold the lock: {other:?}"),
    }
    let fenced = NewEvent::new(
        "d1/fence",
        Event::ActionsFenced {
            deploy_id: "d1".into(),
        },
    );
    ok(
        store.append(&stream, &fenced, &fence).await,
        "FenceLock by the holder",
    );
    let held = ok(store.lock_holder(&stream).await, "lock_holder").expect("held");
    let since = held.fenced.clone().expect("the holder shows its fence");
    assert_eq!(
        Holder {
            fenced: None,
            ..held
        },
        holder("d1"),
        "the fence changes nothing else of the holder"
    );
    let before = count(store, &stream).await;
    match store
        .append(
            &stream,
            &NewEvent::new("d1/B/create/intent", intent("d1", "B")),
            &open,
        )
        .await
    {
        Err(StoreError::Fenced { deploy_id }) => assert_eq!(deploy_id, "d1"),
        other => panic!("a new intent under a fenced lock must be Fenced, got {other:?}"),
    }
    assert_eq!(
        count(store, &stream).await,
        before,
        "a refused intent appends nothing"
    );
    assert!(
        matches!(
            ok(
                store.append(&stream, &early, &open).await,
                "a retried intent"
            ),
            Appended::AlreadyThere(_)
        ),
        "an intent stored before the fence, appended again, is already there"
    );
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d1/A/create/done", resource_created("d1", "A", "a")),
                &Precondition::HoldsLock("d1".into()),
            )
            .await,
        "an outcome under a fenced lock",
    );
    ok(
        store
            .append(
                &stream,
                &NewEvent::new(
                    "d1/fence-again",
                    Event::ActionsFenced {
                        deploy_id: "d1".into(),
                    },
                ),
                &fence,
            )
            .await,
        "a second fence (a retried Fail)",
    );
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder")
            .and_then(|h| h.fenced)
            .as_deref(),
        Some(since.as_str()),
        "fencing again keeps the first fence's time"
    );
    ok(
        store
            .append(
                &stream,
                &NewEvent::new(
                    "d1/release",
                    Event::LockReleased {
                        deploy_id: "d1".into(),
                    },
                ),
                &Precondition::ReleaseLock("d1".into()),
            )
            .await,
        "release a fenced lock",
    );
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d3/start", deploy_started("d3")),
                &Precondition::TakeLock(holder("d3")),
            )
            .await,
        "TakeLock after a fenced lock was released",
    );
    assert_eq!(
        ok(store.lock_holder(&stream).await, "lock_holder"),
        Some(holder("d3")),
        "a new lock is open"
    );
    ok(
        store
            .append(
                &stream,
                &NewEvent::new("d3/C/create/intent", intent("d3", "C")),
                &Precondition::HoldsOpenLock("d3".into()),
            )
            .await,
        "an intent under the new lock",
    );
}
