//! Throttling signals, from the calls a task makes to whoever limits how many tasks of a
//! service run at once, and the AWS service a resource type's calls go to.
//!
//! The engine runs each resource action inside [`observed`] with a [`ThrottleSink`];
//! [`crate::retry::retry`] tells that sink of every throttled call (with the service's
//! `Retry-After`, when it sent one) before it backs off, and after the backoff waits for
//! the sink to let the call be sent again ([`ready`]): the action gives up its place in
//! the throttled service's limit and queues for one, so the retries of many actions go
//! out no faster than the lowered limit allows. Outside [`observed`] (lookups, tests)
//! nothing is told and nothing waits.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// Receives the throttling answers of the calls of one task.
pub trait ThrottleSink: Send + Sync {
    /// A call was throttled. `service` names the service when the call site knows it is
    /// not the one the task's own calls go to (a Cloud Control handler throttled by the
    /// target service); `None` is the service the task's calls go to. `retry_after` is the
    /// wait the service asked for.
    fn throttled(&self, service: Option<&str>, retry_after: Option<Duration>);

    /// Resolves when a throttled call may be sent again (the service has room for the
    /// action again); at once by default.
    fn ready(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }

    /// A sink for work the task leaves running in the background (a read after a write,
    /// off the critical path) that must still keep within the services' limits: it
    /// waits for places with [`ThrottleSink::ready`] and gives them back with
    /// [`ThrottleSink::ended`]. `None`: the background work is not limited.
    fn background(&self) -> Option<Arc<dyn ThrottleSink>> {
        None
    }

    /// The background work of a sink made by [`ThrottleSink::background`] ended.
    fn ended(&self) {}
}

tokio::task_local! {
    static SINK: Arc<dyn ThrottleSink>;
}

/// Runs `work` with `sink` receiving the throttling answers of its calls.
pub async fn observed<F: Future>(sink: Arc<dyn ThrottleSink>, work: F) -> F::Output {
    SINK.scope(sink, work).await
}

/// Tells the sink of the running task, if any, of a throttled call.
pub fn report(service: Option<&str>, retry_after: Option<Duration>) {
    let _ = SINK.try_with(|sink| sink.throttled(service, retry_after));
}

/// Waits until the running task's sink lets a throttled call be sent again (at once
/// outside [`observed`]).
pub async fn ready() {
    if let Ok(sink) = SINK.try_with(Arc::clone) {
        sink.ready().await;
    }
}

/// The background sink of the running task's sink, to pass to [`in_background`].
pub fn background() -> Option<Arc<dyn ThrottleSink>> {
    SINK.try_with(|sink| sink.background()).ok().flatten()
}

/// Runs background `work` within the limits `sink` keeps (when there is one): it
/// starts once its services have room, and gives the room back when it ends.
pub async fn in_background<F: Future>(sink: Option<Arc<dyn ThrottleSink>>, work: F) -> F::Output {
    let Some(sink) = sink else {
        return work.await;
    };
    sink.ready().await;
    let out = observed(sink.clone(), work).await;
    sink.ended();
    out
}

/// The service a resource type belongs to, as AWS names it in request signatures where
/// that differs from the type's own segment: `AWS::SQS::Queue` is `sqs`,
/// `AWS::CloudWatch::Alarm` is `monitoring`, `AWS::StepFunctions::StateMachine` is
/// `states`. Custom resources are `lambda` (their handlers are invoked); a type that is
/// not `Vendor::Service::Thing` is itself, lowercased.
pub fn service_of(resource_type: &str) -> String {
    if crate::registry::is_custom_type(resource_type) {
        return "lambda".to_string();
    }
    let mut parts = resource_type.split("::");
    let segment = match (parts.next(), parts.next(), parts.next()) {
        (Some(_), Some(service), Some(_)) => service,
        _ => resource_type,
    };
    let lower = segment.to_ascii_lowercase();
    let signed = match lower.as_str() {
        "cloudwatch" => "monitoring",
        "stepfunctions" => "states",
        "certificatemanager" => "acm",
        "elasticloadbalancingv2" => "elasticloadbalancing",
        "kinesisfirehose" => "firehose",
        "cognito" => "cognito-idp",
        "apigatewayv2" => "apigateway",
        "opensearchservice" => "es",
        other => other,
    };
    signed.to_string()
}

/// The service name of Cloud Control's own API in request signatures.
pub const CLOUD_CONTROL: &str = "cloudcontrolapi";

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<(Option<String>, Option<Duration>)>>);

    impl ThrottleSink for Seen {
        fn throttled(&self, service: Option<&str>, retry_after: Option<Duration>) {
            self.0
                .lock()
                .unwrap()
                .push((service.map(str::to_string), retry_after));
        }
    }

    #[test]
    fn services_of_types() {
        assert_eq!(service_of("AWS::SQS::Queue"), "sqs");
        assert_eq!(service_of("AWS::Logs::LogGroup"), "logs");
        assert_eq!(service_of("AWS::CloudWatch::Alarm"), "monitoring");
        assert_eq!(service_of("AWS::StepFunctions::StateMachine"), "states");
        assert_eq!(service_of("Custom::Thing"), "lambda");
        assert_eq!(service_of("AWS::CloudFormation::CustomResource"), "lambda");
        assert_eq!(service_of("Odd"), "odd");
    }

    #[tokio::test]
    async fn reports_reach_the_sink_of_the_running_task_only() {
        let seen = Arc::new(Seen::default());
        report(None, None);
        observed(seen.clone(), async {
            report(None, Some(Duration::from_secs(2)));
            report(Some("sqs"), None);
        })
        .await;
        report(Some("lost"), None);
        let got = seen.0.lock().unwrap().clone();
        assert_eq!(
            got,
            [
                (None, Some(Duration::from_secs(2))),
                (Some("sqs".to_string()), None)
            ]
        );
    }
}
