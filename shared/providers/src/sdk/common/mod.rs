//! What the SDK providers share, so that each `sdk/<service>.rs` holds only the mapping of
//! its resource type onto its service's API:
//!
//! - [`sdk_provider!`]: the provider struct (a client and a [`RetryPolicy`]), its `new` and
//!   `with_retry`, and its [`Provider`](crate::provider::Provider) implementation, which
//!   hands every operation to the type's [`SdkResource`] implementation;
//! - [`SdkResource`]: create, update and remove, plus a lookup ([`SdkResource::find`])
//!   from which `import` (by the explicit id or the template's name) and
//!   `read_current_state` (the "read" shell: not found, or the state) are derived;
//! - [`calls`]: one SDK call, retried and its error classified ([`call`]),
//!   [`missing_as_none`], [`find_in_pages`];
//! - a create never takes over a named resource that exists:
//!   [`SdkResource::name_taken`] is the error, [`refuse_taken`] the check before a create
//!   call that would answer the existing resource;
//! - [`props`]: property accessors ([`text`], [`string_of`], [`int_of`], ...) and messages
//!   ([`invalid`], [`context`], [`vanished`], [`keep_name`]);
//! - [`marks`]: the `stackflow:token` tag a create leaves, which proves later that the
//!   stack made the resource ([`SdkResource::made_by`]);
//! - [`tags`]: the template's `Key`/`Value` lists ([`tag_map`], [`tag_pairs`]), what changed
//!   between two sets ([`tags::TagChanges`]) and how a service applies it ([`Tagging`],
//!   [`tagging!`]), and the state's sorted list ([`insert_tags`]).
//!
//! [`RetryPolicy`]: crate::retry::RetryPolicy

use std::future::Future;

use crate::error::ProviderError;
use crate::provider::{Attributes, Created, CurrentState, Deleted, Imported};
use crate::provider::{ResourceRequest, Updated};

pub(crate) mod calls;
pub mod marks;
pub(crate) mod props;
pub(crate) mod tags;

pub(crate) use calls::{call, call_classified, find_in_pages, missing_as_none};
pub(crate) use props::{
    context, id_attributes, int_of, invalid, keep_name, string_of, string_or_number_of, text,
    value_string, vanished,
};
pub(crate) use tags::{Tagging, insert_tags, sdk_tags, tag_map, tag_pairs, tagging};

/// The operations of one SDK provider; [`sdk_provider!`] makes a
/// [`Provider`](crate::provider::Provider) of them.
pub(crate) trait SdkResource: Sync {
    /// What [`SdkResource::find`] knows of an existing resource.
    type Found: Send;

    /// The resource type.
    const TYPE: &'static str;

    /// The property that names the resource: what `import` looks up when no id is given.
    const NAME_PROPERTY: &'static str;

    /// What the resource is called in messages (`topic`, `log group`).
    const NOUN: &'static str;

    /// The error of a create that finds the name the template gives (`name`) taken by a
    /// resource this stack did not make ([`ProviderError::name_taken`]).
    fn name_taken(name: &str) -> ProviderError {
        ProviderError::name_taken(&format!("{} {name}", Self::TYPE), Self::NOUN)
    }

    /// Creates the resource from `request.properties`.
    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError>;

    /// Updates the resource `request.physical_id` in place.
    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError>;

    /// Deletes the resource `id` (a [`ProviderError::NotFound`]: it is gone already).
    async fn remove(&self, id: &str) -> Result<(), ProviderError>;

    /// Looks the resource `id` up: `None` when it does not exist.
    async fn find(&self, id: &str) -> Result<Option<Self::Found>, ProviderError>;

    /// The `Fn::GetAtt` values of the resource `id`.
    fn attributes(&self, id: &str, found: &Self::Found) -> Attributes;

    /// The state of the existing resource `id`, in the template's shape.
    async fn state(&self, id: &str, found: Self::Found) -> Result<CurrentState, ProviderError>;

    /// Whether the resource `request.physical_id` carries the proof that the create
    /// `request` made it (see [`marks`]). No proof unless the type leaves a mark.
    async fn made_by(&self, request: &ResourceRequest) -> Result<bool, ProviderError> {
        let _ = request;
        Ok(false)
    }

    /// The id `import` looks for: the explicit one, else the name the template gives.
    async fn import_id(&self, request: &ResourceRequest) -> Result<Option<String>, ProviderError> {
        Ok(request.explicit_or_named(Self::NAME_PROPERTY))
    }

    /// The physical id of a resource found under `id` (`id` itself unless overridden).
    fn physical_id(id: String, found: &Self::Found) -> String {
        let _ = found;
        id
    }

    /// Deletes the resource `request.physical_id`; one that is gone already is done.
    async fn delete(&self, request: &ResourceRequest) -> Result<Deleted, ProviderError> {
        let id = request.require_physical_id()?;
        Deleted::unless_missing(self.remove(id).await)
            .map_err(|e| e.context(context(request, Self::TYPE)))
    }

    /// Finds the resource [`SdkResource::import_id`] names.
    async fn import(&self, request: &ResourceRequest) -> Result<Imported, ProviderError> {
        let Some(id) = self.import_id(request).await? else {
            return Ok(Imported::NotDeployedYet);
        };
        Ok(match self.find(&id).await? {
            Some(found) => Imported::Found {
                attributes: self.attributes(&id, &found),
                physical_id: Self::physical_id(id, &found),
            },
            None => Imported::NotDeployedYet,
        })
    }

    /// What AWS holds now for `request.physical_id`.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let id = request.require_physical_id()?;
        match self.find(id).await? {
            Some(found) => self.state(id, found).await,
            None => Ok(CurrentState::NotFound),
        }
    }
}

/// Refuses the create of a resource of type `R` when the name the template gives (`name`;
/// `generated` false) is taken: `exists` looks it up. Every SDK provider calls it once,
/// before the create call and outside its retries. Where the create call answers the
/// existing resource (SNS `CreateTopic`, SQS `CreateQueue`, S3 `CreateBucket` in
/// us-east-1) it is the only way to tell; where the call refuses a taken name itself (SSM,
/// DynamoDB, IAM, Lambda, Logs), it tells someone else's resource (taken before the call)
/// from the call's own (taken since: an attempt whose answer was lost, which the provider
/// then adopts). A generated name holds the hash of the request's token, so it is this
/// stack's alone: not looked up.
pub(crate) async fn refuse_taken<R: SdkResource, T>(
    name: &str,
    generated: bool,
    exists: impl Future<Output = Result<Option<T>, ProviderError>>,
) -> Result<(), ProviderError> {
    if !generated && exists.await?.is_some() {
        return Err(R::name_taken(name));
    }
    Ok(())
}

/// Declares an SDK provider: `pub const TYPE`, the struct (a client and a retry policy) with
/// `new` and `with_retry`, and its `Provider` implementation (named `sdk:{TYPE}`, handling
/// the listed properties), which hands each operation to the struct's [`SdkResource`]
/// implementation.
macro_rules! sdk_provider {
    (
        $(#[$doc:meta])*
        $name:ident($client:ty), $type_name:literal, $handled:expr
    ) => {
        /// The resource type this provider handles.
        pub const TYPE: &str = $type_name;

        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            client: $client,
            retry: $crate::retry::RetryPolicy,
        }

        impl $name {
            /// A provider using `client`, with the default retry policy.
            pub fn new(client: $client) -> Self {
                $name {
                    client,
                    retry: $crate::retry::RetryPolicy::default(),
                }
            }

            /// Replaces the retry policy.
            pub fn with_retry(mut self, retry: $crate::retry::RetryPolicy) -> Self {
                self.retry = retry;
                self
            }
        }

        $crate::sdk::common::sdk_provider!(@provider $name, $type_name, $handled);
    };
    (@provider $name:ident, $type_name:literal, $handled:expr) => {
        impl $crate::provider::Provider for $name {
            fn name(&self) -> &str {
                concat!("sdk:", $type_name)
            }

            fn handled_properties(&self, _resource_type: &str) -> Option<&[&str]> {
                Some($handled)
            }

            $crate::sdk::common::sdk_provider!(@forward create, create, Created);
            $crate::sdk::common::sdk_provider!(@forward update, update, Updated);
            $crate::sdk::common::sdk_provider!(@forward delete, delete, Deleted);
            $crate::sdk::common::sdk_provider!(@forward import, import, Imported);
            $crate::sdk::common::sdk_provider!(@forward read_current_state, read, CurrentState);

            fn made_by<'a>(
                &'a self,
                request: &'a $crate::provider::ResourceRequest,
            ) -> $crate::provider::ProviderFuture<'a, bool> {
                Box::pin($crate::sdk::common::SdkResource::made_by(self, request))
            }
        }
    };
    (@forward $method:ident, $operation:ident, $answer:ident) => {
        fn $method<'a>(
            &'a self,
            request: &'a $crate::provider::ResourceRequest,
        ) -> $crate::provider::ProviderFuture<'a, $crate::provider::$answer> {
            Box::pin($crate::sdk::common::SdkResource::$operation(self, request))
        }
    };
}
pub(crate) use sdk_provider;

/// Helpers for the unit tests of the providers.
#[cfg(test)]
pub(crate) mod testing {
    use serde_json::Value;

    use crate::provider::Properties;

    /// The properties of a JSON object (empty for anything else).
    pub(crate) fn props(value: Value) -> Properties {
        value.as_object().cloned().unwrap_or_default()
    }
}
