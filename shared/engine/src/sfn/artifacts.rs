//! Where a deploy's documents live in the engine's bucket: under
//! `deploys/<stack>/<deploy>/`, the stack input, `plan.json`, each phase's graph
//! (`provision.json`, `cleanup.json`), the gates' tokens and the `done`/`failed` markers.

use aws_sdk_s3::types::ServerSideEncryption;
use serde::Deserialize;
use stackflow_events::EventStore;

use super::errors::{ErrorKind, TaskError};
use super::payloads::Phase;
use super::tasks::Tasks;
use crate::deploy::{Deployment, PlanDocument};
use crate::schedule::Task;

/// A failed AWS call of a task.
pub(crate) fn aws_error<E: std::fmt::Display>(what: &str, e: E) -> TaskError {
    TaskError::new(ErrorKind::Aws, format!("{what}: {e}"))
}

/// A failed S3 call of a task, in words: the service's `Code: message`, from the answer's
/// body, or from its `x-amz-error-*` headers when it has none; no Debug dump of the SDK's
/// error.
fn s3_error<E: std::error::Error + 'static>(
    what: &str,
    e: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> TaskError {
    let header = |name: &str| {
        e.raw_response()
            .and_then(|r| r.headers().get(name))
            .map(str::to_string)
    };
    let said = match (header("x-amz-error-code"), header("x-amz-error-message")) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code,
        _ => stackflow_providers::error::error_chain(e),
    };
    aws_error(what, said)
}

/// The most bytes a task reads from one object: a deploy's document, a template or a
/// zipped `cdk.out` dropped in the bucket, a pipeline's input artifact. Held in memory
/// (and an archive inflated to at most [`super::triggers::unzip::MAX_UNZIPPED`] in `/tmp`).
pub const MAX_OBJECT_BYTES: u64 = 128 * 1024 * 1024;

/// The body of an object read through `GetObject` (`what` names it), refused as it
/// streams once it passes `max` bytes (at once when `length`, its `Content-Length`,
/// says so): nothing larger is ever held in memory.
pub async fn read_body(
    mut body: aws_sdk_s3::primitives::ByteStream,
    length: Option<i64>,
    max: u64,
    what: &str,
) -> Result<Vec<u8>, TaskError> {
    let too_large = || {
        TaskError::new(
            ErrorKind::Input,
            format!(
                "{what} is larger than {} MiB, the most a task reads: deploy a smaller \
                 archive (leave out what `cdk synth` does not need, such as node_modules \
                 outside the assets)",
                max / (1024 * 1024)
            ),
        )
    };
    if length.is_some_and(|l| u64::try_from(l).unwrap_or(0) > max) {
        return Err(too_large());
    }
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| aws_error(what, e))?;
        if out.len() as u64 + chunk.len() as u64 > max {
            return Err(too_large());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The folder of one deploy's documents.
pub(crate) fn prefix(stack: &str, deploy_id: &str) -> String {
    format!("deploys/{stack}/{deploy_id}/")
}

impl<S: EventStore + 'static> Tasks<S> {
    /// Writes `key`, encrypted at rest (SSE-KMS with the configured key, else SSE-S3):
    /// a deploy's input and plan hold its `NoEcho` parameter values.
    pub(crate) async fn put(&self, key: &str, body: Vec<u8>) -> Result<(), TaskError> {
        let put = self.s3.put_object().bucket(&self.bucket).key(key);
        let put = match &self.kms_key {
            Some(k) => put
                .server_side_encryption(ServerSideEncryption::AwsKms)
                .ssekms_key_id(k),
            None => put.server_side_encryption(ServerSideEncryption::Aes256),
        };
        put.body(body.into())
            .send()
            .await
            .map_err(|e| s3_error(&format!("PutObject s3://{}/{key}", self.bucket), &e))?;
        Ok(())
    }

    pub(crate) async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, TaskError> {
        match self
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => {
                let what = format!("s3://{}/{key}", self.bucket);
                let length = out.content_length;
                read_body(out.body, length, MAX_OBJECT_BYTES, &what)
                    .await
                    .map(Some)
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
            Err(e) => Err(s3_error(
                &format!("GetObject s3://{}/{key}", self.bucket),
                &e,
            )),
        }
    }

    /// Whether marker `key` is there. Read with `GetObject` (markers are a few bytes), not
    /// `HeadObject`: both need `s3:GetObject`, but a refused `HEAD` has no body, so its
    /// error says nothing of why.
    pub(crate) async fn exists(&self, key: &str) -> Result<bool, TaskError> {
        match self
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(false),
            Err(e) => Err(s3_error(
                &format!("GetObject s3://{}/{key}", self.bucket),
                &e,
            )),
        }
    }

    pub(crate) async fn list(&self, prefix: &str) -> Result<Vec<String>, TaskError> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = self
                .s3
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(token.clone())
                .send()
                .await
                .map_err(|e| {
                    s3_error(&format!("ListObjectsV2 s3://{}/{prefix}", self.bucket), &e)
                })?;
            keys.extend(
                out.contents()
                    .iter()
                    .filter_map(|o| o.key().map(String::from)),
            );
            match out.next_continuation_token() {
                Some(t) if out.is_truncated() == Some(true) => token = Some(t.to_string()),
                _ => break,
            }
        }
        Ok(keys)
    }

    pub(crate) async fn json<T: for<'de> Deserialize<'de>>(
        &self,
        key: &str,
    ) -> Result<T, TaskError> {
        let body = self.get(key).await?.ok_or_else(|| {
            TaskError::new(
                ErrorKind::Input,
                format!("s3://{}/{key} does not exist", self.bucket),
            )
        })?;
        serde_json::from_slice(&body).map_err(|e| {
            TaskError::new(
                ErrorKind::Input,
                format!(
                    "s3://{}/{key} is not what stackflow wrote: {e}",
                    self.bucket
                ),
            )
        })
    }

    pub(crate) async fn delete(&self, key: &str) -> Result<(), TaskError> {
        self.s3
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| s3_error(&format!("DeleteObject s3://{}/{key}", self.bucket), &e))?;
        Ok(())
    }

    /// Once a deploy has ended, nothing it stored keeps a secret: its input is deleted
    /// and its plan is rewritten without the `NoEcho` values (a retried end task reads
    /// it again; its outputs are masked either way).
    pub(crate) async fn forget_secrets(
        &self,
        stack: &str,
        deploy_id: &str,
    ) -> Result<(), TaskError> {
        self.delete(&format!("inputs/{stack}/{deploy_id}.json"))
            .await?;
        let key = format!("{}plan.json", prefix(stack, deploy_id));
        let Some(body) = self.get(&key).await? else {
            return Ok(());
        };
        let Ok(mut doc) = serde_json::from_slice::<PlanDocument>(&body) else {
            return Ok(());
        };
        if doc.input.parameters.secret_values().is_empty() {
            return Ok(());
        }
        doc.input.parameters = doc.input.parameters.redacted();
        self.put(&key, serde_json::to_vec(&doc).unwrap_or_default())
            .await
    }

    pub(crate) async fn deployment(
        &self,
        stack: &str,
        deploy_id: &str,
    ) -> Result<Deployment<S>, TaskError> {
        let doc: PlanDocument = self
            .json(&format!("{}plan.json", prefix(stack, deploy_id)))
            .await?;
        let mut d = Deployment::resume(self.engine.clone(), doc).await?;
        // (its Fail fences the lock: `Tasks::fail_or_wait`)
        d.fenced_by_lock = true;
        Ok(d)
    }

    /// The dependencies of each item of a phase, as stored when the phase was planned.
    pub(crate) async fn graph(
        &self,
        stack: &str,
        deploy_id: &str,
        phase: Phase,
    ) -> Result<Vec<Task>, TaskError> {
        let key = format!("{}{}.json", prefix(stack, deploy_id), phase.as_str());
        let pairs: Vec<(String, Vec<String>)> = self.json(&key).await?;
        Ok(pairs
            .into_iter()
            .map(|(id, deps)| Task::new(id, deps))
            .collect())
    }

    pub(crate) async fn put_graph(
        &self,
        stack: &str,
        deploy_id: &str,
        phase: Phase,
        tasks: &[Task],
    ) -> Result<(), TaskError> {
        let pairs: Vec<(&String, &Vec<String>)> = tasks.iter().map(|t| (&t.id, &t.deps)).collect();
        let key = format!("{}{}.json", prefix(stack, deploy_id), phase.as_str());
        self.put(&key, serde_json::to_vec(&pairs).unwrap_or_default())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_s3::primitives::ByteStream;

    /// A refused call reads `Code: message`: from the body's error metadata, or from the
    /// `x-amz-error-*` headers of an answer with no body; never the SDK's Debug dump.
    #[test]
    fn a_refused_s3_call_says_its_code_and_message() {
        use aws_sdk_s3::config::http::HttpResponse;
        use aws_sdk_s3::error::{ErrorMetadata, SdkError};
        use aws_sdk_s3::operation::get_object::GetObjectError;
        let answer = |headers: &[(&'static str, &'static str)]| {
            let mut r = HttpResponse::new(
                403.try_into().unwrap(),
                ByteStream::from_static(b"").into_inner(),
            );
            for (k, v) in headers {
                r.headers_mut().insert(*k, *v);
            }
            r
        };
        let refused = |meta: ErrorMetadata, headers| {
            SdkError::service_error(GetObjectError::generic(meta), answer(headers))
        };
        let with_body = refused(
            ErrorMetadata::builder()
                .code("AccessDenied")
                .message("not for you")
                .build(),
            &[],
        );
        let e = s3_error("GetObject s3://b/k", &with_body);
        assert_eq!(e.kind, ErrorKind::Aws);
        assert_eq!(e.message, "GetObject s3://b/k: AccessDenied: not for you");
        let headless = refused(
            ErrorMetadata::builder().build(),
            &[
                ("x-amz-error-code", "AccessDenied"),
                ("x-amz-error-message", "not for you either"),
            ],
        );
        let e = s3_error("HeadObject s3://b/k", &headless);
        assert_eq!(
            e.message,
            "HeadObject s3://b/k: AccessDenied: not for you either"
        );
    }

    #[tokio::test]
    async fn a_body_is_read_whole_up_to_its_bound_and_refused_past_it() {
        let body = || ByteStream::from(vec![7u8; 1000]);
        let read = read_body(body(), None, 1000, "s3://b/k").await.unwrap();
        assert_eq!(read.len(), 1000);
        // Past the bound, as it streams (no length given) or at once (a length says so).
        for length in [None, Some(1000)] {
            let e = read_body(body(), length, 999, "s3://b/k")
                .await
                .unwrap_err();
            assert_eq!(e.kind, ErrorKind::Input, "{e:?}");
            assert!(e.message.contains("s3://b/k is larger than"), "{e:?}");
        }
        let e = read_body(ByteStream::from(vec![]), Some(5_000), 999, "s3://b/k")
            .await
            .unwrap_err();
        assert!(
            e.message.contains("larger than"),
            "refused before reading: {e:?}"
        );
    }
}
