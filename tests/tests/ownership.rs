//! Ownership is proven, never assumed (issue 23, items 1 and 2), against the emulator:
//!
//! - **after a crash**: a named topic, queue and parameter that someone else made, and a
//!   deploy of a template naming them that is killed after each of its appends in turn
//!   (the store fails every write once N appends succeeded). The next run replays the
//!   interrupted creates: "already exists" does not show that the call reached AWS, so
//!   nothing is adopted; their properties and tags stay as their owner left them, the
//!   state records none of them, and a destroy deletes none of them.
//! - **in a race**: the name is free when the provider looks it up, and someone else takes
//!   it before the create call (a [`GateProxy`] holds the call while the test makes their
//!   resource). SNS `CreateTopic` and SQS `CreateQueue` answer the existing resource as if
//!   they had made it; SSM `PutParameter` refuses it, after which a create that took it
//!   for its own lost answer would overwrite it. Each is refused, and theirs is untouched:
//!   only the create's `stackflow:token` mark proves a resource is the create's own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use aws_sdk_ssm::types::{ParameterType, ResourceTypeForTagging};
use serde_json::json;
use stackflow_core::template::{StackTemplate, Template};
use stackflow_engine::{DeployOptions, Engine, StackStatus, deploy_stack, destroy_stack};
use stackflow_events::memory::FaultyStore;
use stackflow_events::sqlite::SqliteStore;
use stackflow_events::{StreamId, load_state};
use stackflow_providers::sdk::marks::TOKEN_MARK;
use stackflow_providers::sdk::sns::SnsTopicProvider;
use stackflow_providers::sdk::{SqsQueueProvider, SsmParameterProvider};
use stackflow_providers::{Created, Provider, ProviderError};
use stackflow_tests::deploy::{engine, input, summary};
use stackflow_tests::emulator::REGION;
use stackflow_tests::gate::GateProxy;
use stackflow_tests::round_trip::request;
use stackflow_tests::{Emulator, unique_name};

type Store = FaultyStore<SqliteStore>;

/// Someone else's topic, queue and parameter, as their owner made them.
struct Theirs {
    topic: String,
    queue: String,
    parameter: String,
}

/// What their resources hold: the topic's display name and tags, the queue's visibility
/// timeout and tags, the parameter's value, version and tags.
type Held = (
    String,
    Vec<(String, String)>,
    String,
    Vec<(String, String)>,
    String,
    i64,
    Vec<(String, String)>,
);

struct Clients {
    sns: aws_sdk_sns::Client,
    sqs: aws_sdk_sqs::Client,
    ssm: aws_sdk_ssm::Client,
}

impl Clients {
    async fn new() -> Clients {
        let config = Emulator::shared().await.sdk_config().await;
        Clients {
            sns: aws_sdk_sns::Client::new(&config),
            sqs: aws_sdk_sqs::Client::new(&config),
            ssm: aws_sdk_ssm::Client::new(&config),
        }
    }

    async fn their_topic(&self, name: &str) -> String {
        let tag = aws_sdk_sns::types::Tag::builder()
            .key("owner")
            .value("other")
            .build();
        let made = self
            .sns
            .create_topic()
            .name(name)
            .attributes("DisplayName", "theirs");
        let made = made
            .tags(tag.expect("a tag"))
            .send()
            .await
            .expect("CreateTopic");
        made.topic_arn().expect("an ARN").to_string()
    }

    async fn their_queue(&self, name: &str) -> String {
        let made = self.sqs.create_queue().queue_name(name);
        let made = made.attributes(QueueAttributeName::VisibilityTimeout, "45");
        let made = made
            .tags("owner", "other")
            .send()
            .await
            .expect("CreateQueue");
        made.queue_url().expect("a URL").to_string()
    }

    async fn their_parameter(&self, name: &str) {
        let tag = aws_sdk_ssm::types::Tag::builder()
            .key("owner")
            .value("other")
            .build();
        let put = self.ssm.put_parameter().name(name).value("theirs");
        let put = put.r#type(ParameterType::String).tags(tag.expect("a tag"));
        put.send().await.expect("PutParameter");
    }

    async fn topic_held(&self, arn: &str) -> (String, Vec<(String, String)>) {
        let got = self.sns.get_topic_attributes().topic_arn(arn).send().await;
        let mut attributes = got
            .expect("their topic exists")
            .attributes()
            .cloned()
            .unwrap_or_default();
        let tags = self
            .sns
            .list_tags_for_resource()
            .resource_arn(arn)
            .send()
            .await;
        let tags = tags.expect("ListTagsForResource");
        let tags = tags
            .tags()
            .iter()
            .map(|t| (t.key().to_string(), t.value().to_string()))
            .collect();
        (attributes.remove("DisplayName").unwrap_or_default(), tags)
    }

    async fn queue_held(&self, url: &str) -> (String, Vec<(String, String)>) {
        let got = self.sqs.get_queue_attributes().queue_url(url);
        let got = got
            .attribute_names(QueueAttributeName::VisibilityTimeout)
            .send()
            .await;
        let attributes = got
            .expect("their queue exists")
            .attributes()
            .cloned()
            .unwrap_or_default();
        let timeout = attributes
            .get(&QueueAttributeName::VisibilityTimeout)
            .cloned();
        let tags = self.sqs.list_queue_tags().queue_url(url).send().await;
        let tags: HashMap<String, String> = tags
            .expect("ListQueueTags")
            .tags()
            .cloned()
            .unwrap_or_default();
        let mut tags: Vec<_> = tags.into_iter().collect();
        tags.sort();
        (timeout.unwrap_or_default(), tags)
    }

    async fn parameter_held(&self, name: &str) -> (String, i64, Vec<(String, String)>) {
        let got = self.ssm.get_parameter().name(name).send().await;
        let got = got.expect("their parameter exists");
        let p = got.parameter().expect("a parameter");
        let tags = self
            .ssm
            .list_tags_for_resource()
            .resource_type(ResourceTypeForTagging::Parameter);
        let tags = tags
            .resource_id(name)
            .send()
            .await
            .expect("ListTagsForResource");
        let tags = tags.tag_list().iter();
        let tags = tags
            .map(|t| (t.key().to_string(), t.value().to_string()))
            .collect();
        (p.value().unwrap_or_default().to_string(), p.version(), tags)
    }

    async fn held(&self, theirs: &Theirs) -> Held {
        let (display, topic_tags) = self.topic_held(&theirs.topic).await;
        let (timeout, queue_tags) = self.queue_held(&theirs.queue).await;
        let (value, version, parameter_tags) = self.parameter_held(&theirs.parameter).await;
        (
            display,
            topic_tags,
            timeout,
            queue_tags,
            value,
            version,
            parameter_tags,
        )
    }
}

fn owner() -> Vec<(String, String)> {
    vec![("owner".to_string(), "other".to_string())]
}

/// A stack whose template names `tag`'s topic, queue and parameter, with other properties.
fn stack(tag: &str) -> StackTemplate {
    let resources = json!({
        "Topic": {"Type": "AWS::SNS::Topic",
            "Properties": {"TopicName": format!("{tag}-t"), "DisplayName": "ours",
                "Tags": [{"Key": "team", "Value": "stack"}]}},
        "Queue": {"Type": "AWS::SQS::Queue",
            "Properties": {"QueueName": format!("{tag}-q"), "VisibilityTimeout": 30,
                "Tags": [{"Key": "team", "Value": "stack"}]}},
        "Param": {"Type": "AWS::SSM::Parameter",
            "Properties": {"Name": format!("/{tag}/p"), "Type": "String", "Value": "ours",
                "Tags": {"team": "stack"}}}
    });
    let template = Template::from_value(&json!({ "Resources": resources })).expect("a template");
    StackTemplate {
        display_name: None,
        name: tag.to_string(),
        file: "ownership.json".into(),
        template,
        dependencies: Vec::new(),
        parameters: Default::default(),
        nested: Default::default(),
        assets: None,
        environment: Default::default(),
    }
}

/// An engine recording in a new SQLite store behind a [`FaultyStore`]; a lock's holder
/// counts as gone (the crashed run's process).
async fn crash_engine() -> Arc<Engine<Store>> {
    let emulator = Emulator::shared().await;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique_name("ownership"));
    std::fs::create_dir_all(&dir).expect("the store's directory");
    let sqlite = SqliteStore::open(dir.join("events.db")).expect("a store file");
    let built = engine(
        &emulator.sdk_config().await,
        Arc::new(FaultyStore::new(sqlite)),
    );
    let mut e = Arc::into_inner(built).expect("a new engine");
    e.stale = Arc::new(|_| true);
    Arc::new(e)
}

#[tokio::test]
async fn a_replayed_create_never_adopts_their_topic_queue_or_parameter() {
    let clients = Clients::new().await;
    let tag = unique_name("own");
    let theirs = Theirs {
        topic: clients.their_topic(&format!("{tag}-t")).await,
        queue: clients.their_queue(&format!("{tag}-q")).await,
        parameter: format!("/{tag}/p"),
    };
    clients.their_parameter(&theirs.parameter).await;
    let before = clients.held(&theirs).await;
    assert_eq!(before.1, owner());
    let template = stack(&tag);
    let engine = crash_engine().await;
    let store = engine.store.clone();

    // A clean run: every create is refused (the names are theirs); its appends are counted.
    let clean_stack = format!("{tag}-clean");
    let start = store.appended();
    let clean = deploy_stack(
        engine.clone(),
        input(&template, &clean_stack),
        DeployOptions::new(),
    );
    let clean = clean.await.expect("the clean run");
    assert_eq!(clean.status, StackStatus::Failed, "{}", summary(&clean));
    let total = store.appended() - start;
    assert_eq!(clients.held(&theirs).await, before);

    let mut replayed = 0;
    for n in 1..total {
        let name = format!("{tag}-n{n}");
        store.fail_after(store.appended() + n);
        let crashed = deploy_stack(
            engine.clone(),
            input(&template, &name),
            DeployOptions::new(),
        );
        let crashed = crashed.await;
        store.heal();
        let stream = StreamId::new(REGION, &name);
        let pending = load_state(store.inner(), &stream)
            .await
            .expect("state")
            .pending
            .len();
        replayed += pending;
        let again = deploy_stack(
            engine.clone(),
            input(&template, &name),
            DeployOptions::new(),
        );
        let again = again
            .await
            .unwrap_or_else(|e| panic!("N={n}: the next run: {e}"));
        let state = load_state(store.inner(), &stream).await.expect("state");
        let line = format!(
            "N={n} (crashed: {crashed:?}; {pending} pending): {}",
            summary(&again)
        );
        assert_eq!(again.status, StackStatus::Failed, "{line}");
        assert!(
            state.resources.is_empty(),
            "{line}: recorded {:?}",
            state.resources
        );
        assert!(state.pending.is_empty(), "{line}: {:?}", state.pending);
        assert_eq!(
            clients.held(&theirs).await,
            before,
            "{line}: theirs changed"
        );
        let destroyed = destroy_stack(engine.clone(), &name, DeployOptions::new()).await;
        destroyed.unwrap_or_else(|e| panic!("{line}: destroy: {e}"));
        assert_eq!(
            clients.held(&theirs).await,
            before,
            "{line}: destroy touched theirs"
        );
    }
    // Some N left intents for the next run to replay: the case this test is about.
    assert!(replayed > 0, "no N of {total} left an intent to replay");
    eprintln!("{total} appends; {replayed} interrupted creates replayed, none adopted");
}

/// A create held at its call while someone else takes the name; what it answers.
async fn raced<F, Fut>(
    operation: &str,
    create: F,
    take: impl Future<Output = ()>,
) -> Result<Created, ProviderError>
where
    F: FnOnce(aws_types::SdkConfig) -> Fut,
    Fut: Future<Output = Result<Created, ProviderError>> + Send + 'static,
{
    let emulator = Emulator::shared().await;
    let gate = GateProxy::start(emulator.endpoint(), &[operation])
        .await
        .expect("a gate");
    let config = emulator
        .sdk_config()
        .await
        .to_builder()
        .endpoint_url(gate.endpoint())
        .build();
    let call = tokio::spawn(create(config));
    assert!(
        gate.wait_arrival(Duration::from_secs(30)).await,
        "{operation} was not called"
    );
    take.await;
    gate.open();
    call.await.expect("the create task")
}

fn refused_as_theirs(answer: &Result<Created, ProviderError>, what: &str) {
    match answer {
        Err(ProviderError::AlreadyExists(m)) => {
            assert!(
                m.contains("did not make it") && m.contains(TOKEN_MARK),
                "{what}: {m}"
            )
        }
        other => panic!("{what}: a name taken in the race must be refused, got {other:?}"),
    }
}

#[tokio::test]
async fn a_name_taken_between_the_check_and_the_create_is_refused() {
    let clients = Clients::new().await;
    let tag = unique_name("race");

    let name = format!("{tag}-t");
    let req = request(
        "Topic",
        "AWS::SNS::Topic",
        json!({"TopicName": name, "DisplayName": "theirs"}),
    );
    let mut arn = String::new();
    let answer = raced(
        "CreateTopic",
        |c| {
            let req = req.clone();
            async move {
                SnsTopicProvider::new(aws_sdk_sns::Client::new(&c))
                    .create(&req)
                    .await
            }
        },
        async { arn = clients.their_topic(&name).await },
    )
    .await;
    refused_as_theirs(&answer, "topic");
    assert_eq!(
        clients.topic_held(&arn).await,
        ("theirs".to_string(), owner())
    );

    let name = format!("{tag}-q");
    let req = request(
        "Queue",
        "AWS::SQS::Queue",
        json!({"QueueName": name, "VisibilityTimeout": 45}),
    );
    let mut url = String::new();
    let answer = raced(
        "CreateQueue",
        |c| {
            let req = req.clone();
            async move {
                SqsQueueProvider::new(aws_sdk_sqs::Client::new(&c))
                    .create(&req)
                    .await
            }
        },
        async { url = clients.their_queue(&name).await },
    )
    .await;
    refused_as_theirs(&answer, "queue");
    assert_eq!(clients.queue_held(&url).await, ("45".to_string(), owner()));

    let name = format!("/{tag}/p");
    let req = request(
        "Param",
        "AWS::SSM::Parameter",
        json!({"Name": name, "Type": "String", "Value": "ours"}),
    );
    let answer = raced(
        "PutParameter",
        |c| {
            let req = req.clone();
            async move {
                SsmParameterProvider::new(aws_sdk_ssm::Client::new(&c))
                    .create(&req)
                    .await
            }
        },
        clients.their_parameter(&name),
    )
    .await;
    refused_as_theirs(&answer, "parameter");
    assert_eq!(
        clients.parameter_held(&name).await,
        ("theirs".to_string(), 1, owner())
    );
}

/// A create of a free name is made, tagged with its mark: proof for its own token only,
/// and left out of what drift reads.
#[tokio::test]
async fn a_create_leaves_a_mark_that_proves_only_it_made_the_resource() {
    let tag = unique_name("mark");
    for (ty, props) in [
        ("AWS::SNS::Topic", json!({"TopicName": format!("{tag}-t2")})),
        ("AWS::SQS::Queue", json!({"QueueName": format!("{tag}-q2")})),
        (
            "AWS::SSM::Parameter",
            json!({"Name": format!("/{tag}/p2"), "Type": "String", "Value": "v"}),
        ),
    ] {
        let config = Emulator::shared().await.sdk_config().await;
        let provider: Box<dyn Provider> = match ty {
            "AWS::SNS::Topic" => Box::new(SnsTopicProvider::new(aws_sdk_sns::Client::new(&config))),
            "AWS::SQS::Queue" => Box::new(SqsQueueProvider::new(aws_sdk_sqs::Client::new(&config))),
            _ => Box::new(SsmParameterProvider::new(aws_sdk_ssm::Client::new(&config))),
        };
        let mut req = request("R", ty, props);
        let made = provider
            .create(&req)
            .await
            .unwrap_or_else(|e| panic!("{ty}: {e}"));
        req.physical_id = Some(made.physical_id.clone());
        assert!(
            provider.made_by(&req).await.expect("made_by"),
            "{ty}: its own"
        );
        let mut other = req.clone();
        other.token = unique_name("token");
        assert!(
            !provider.made_by(&other).await.expect("made_by"),
            "{ty}: another create's"
        );
        // The mark is the stack's bookkeeping: the state leaves it out.
        let state = provider.read_current_state(&req).await.expect("read");
        let text = format!("{state:?}");
        assert!(!text.contains(TOKEN_MARK), "{ty}: {text}");
        provider.delete(&req).await.expect("delete");
    }
}
