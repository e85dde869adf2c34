//! `AWS::SSM::Parameter` through the SSM API.
//!
//! The physical id is the parameter's name. Without a `Name` in the template the name is
//! generated ([`crate::names::physical_name`]); such a name is ours alone, so a create that
//! finds it taken (a retry after a lost answer) overwrites it. A taken name the template
//! gives is [`ProviderError::AlreadyExists`].
//!
//! `read_current_state` reports `Name`, `Type`, `Value`, `Description` and
//! `AllowedPattern` when set, `Tier` and `DataType` only when they differ from AWS's
//! defaults (`Standard`, `text`), and `Tags` (a map, as in the template) when there are any.

use aws_sdk_ssm::Client;
use aws_sdk_ssm::types::{
    ParameterStringFilter, ParameterTier, ParameterType, ResourceTypeForTagging, Tag,
};
use serde_json::{Map, Value, json};

use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{
    Attributes, BoxFuture, Created, CurrentState, Deleted, Imported, Properties, Provider,
    ResourceRequest, Updated,
};
use crate::retry::{RetryPolicy, retry};

/// The resource type this provider handles.
pub const TYPE: &str = "AWS::SSM::Parameter";

const HANDLED: &[&str] = &[
    "Name",
    "Type",
    "Value",
    "Description",
    "AllowedPattern",
    "Tier",
    "DataType",
    "Tags",
];

/// SSM parameter names: letters, digits, `_.-/`, at most 1011 characters with hierarchy.
const NAME_RULES: NameRules = NameRules {
    max_len: 1011,
    extra: "-_.",
    lowercase: false,
};

/// The `AWS::SSM::Parameter` provider.
#[derive(Debug, Clone)]
pub struct SsmParameterProvider {
    client: Client,
    retry: RetryPolicy,
}

impl SsmParameterProvider {
    /// A provider using `client`, with the default retry policy.
    pub fn new(client: Client) -> Self {
        SsmParameterProvider {
            client,
            retry: RetryPolicy::default(),
        }
    }

    /// Replaces the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Writes the parameter (`overwrite`: an existing one is replaced; tags only on a new one).
    async fn put(
        &self,
        name: &str,
        props: &Properties,
        overwrite: bool,
    ) -> Result<(), ProviderError> {
        let value = string_of(props, "Value").ok_or_else(|| {
            ProviderError::InvalidRequest(format!("{TYPE} {name}: Value is required"))
        })?;
        let kind = string_of(props, "Type").unwrap_or_else(|| "String".into());
        let tags = if overwrite {
            Vec::new()
        } else {
            tags_of(props)?
        };
        retry(&self.retry, "PutParameter", || async {
            self.client
                .put_parameter()
                .name(name)
                .value(&value)
                .r#type(ParameterType::from(kind.as_str()))
                .set_description(string_of(props, "Description"))
                .set_allowed_pattern(string_of(props, "AllowedPattern"))
                .set_tier(string_of(props, "Tier").map(|t| ParameterTier::from(t.as_str())))
                .set_data_type(string_of(props, "DataType"))
                .set_tags((!tags.is_empty()).then(|| tags.clone()))
                .overwrite(overwrite)
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("PutParameter", e))
        })
        .await?;
        Ok(())
    }

    /// Makes the parameter's tags those of `props`, given the `previous` ones.
    async fn sync_tags(
        &self,
        name: &str,
        previous: &Properties,
        props: &Properties,
    ) -> Result<(), ProviderError> {
        let old = tag_map(previous);
        let new = tag_map(props);
        let removed: Vec<String> = old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect();
        let changed: Vec<Tag> = tags_of(props)?
            .into_iter()
            .filter(|t| old.get(t.key()).and_then(Value::as_str) != Some(t.value()))
            .collect();
        if !removed.is_empty() {
            retry(&self.retry, "RemoveTagsFromResource", || async {
                self.client
                    .remove_tags_from_resource()
                    .resource_type(ResourceTypeForTagging::Parameter)
                    .resource_id(name)
                    .set_tag_keys(Some(removed.clone()))
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("RemoveTagsFromResource", e))
            })
            .await?;
        }
        if !changed.is_empty() {
            retry(&self.retry, "AddTagsToResource", || async {
                self.client
                    .add_tags_to_resource()
                    .resource_type(ResourceTypeForTagging::Parameter)
                    .resource_id(name)
                    .set_tags(Some(changed.clone()))
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("AddTagsToResource", e))
            })
            .await?;
        }
        Ok(())
    }

    /// `GetParameter`: `(type, value)`, or `None` when the parameter does not exist.
    async fn get(
        &self,
        name: &str,
    ) -> Result<Option<(String, String, Option<String>)>, ProviderError> {
        let got = retry(&self.retry, "GetParameter", || async {
            self.client
                .get_parameter()
                .name(name)
                .send()
                .await
                .map_err(|e| ProviderError::from_sdk("GetParameter", e))
        })
        .await;
        match got {
            Ok(out) => {
                let p = out.parameter();
                Ok(Some((
                    p.and_then(|p| p.r#type())
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    p.and_then(|p| p.value()).unwrap_or_default().to_string(),
                    p.and_then(|p| p.data_type()).map(str::to_string),
                )))
            }
            Err(ProviderError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn attributes(kind: &str, value: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Type".into(), json!(kind));
    a.insert("Value".into(), json!(value));
    a
}

/// A property as a string (numbers and booleans too, as CloudFormation accepts them).
fn string_of(props: &Properties, key: &str) -> Option<String> {
    match props.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn tag_map(props: &Properties) -> Map<String, Value> {
    props
        .get("Tags")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn tags_of(props: &Properties) -> Result<Vec<Tag>, ProviderError> {
    tag_map(props)
        .iter()
        .map(|(k, v)| {
            let value = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            Tag::builder()
                .key(k)
                .value(value)
                .build()
                .map_err(|e| ProviderError::InvalidRequest(format!("tag {k}: {e}")))
        })
        .collect()
}

impl Provider for SsmParameterProvider {
    fn name(&self) -> &str {
        "sdk:AWS::SSM::Parameter"
    }

    fn handled_properties(&self, _resource_type: &str) -> Option<&[&str]> {
        Some(HANDLED)
    }

    fn create<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            let props = &request.properties;
            let (name, generated) = given_or_generated(request, "Name", NAME_RULES);
            match self.put(&name, props, false).await {
                Ok(()) => {}
                Err(ProviderError::AlreadyExists(_)) if generated => {
                    self.put(&name, props, true).await?;
                    self.sync_tags(&name, &Properties::new(), props).await?;
                }
                Err(e) => return Err(e.context(format!("{} ({TYPE})", request.logical_id))),
            }
            let kind = string_of(props, "Type").unwrap_or_else(|| "String".into());
            let value = string_of(props, "Value").unwrap_or_default();
            Ok(Created {
                attributes: attributes(&kind, &value),
                physical_id: name,
            })
        })
    }

    fn update<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Updated, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            if let Some(wanted) = request.string_property("Name")
                && wanted != name
            {
                return Err(ProviderError::NotUpdatable(format!(
                    "{} ({TYPE}): Name {name} -> {wanted} needs a new parameter",
                    request.logical_id
                )));
            }
            let props = &request.properties;
            let previous = request.previous_properties.clone().unwrap_or_default();
            self.put(name, props, true).await?;
            self.sync_tags(name, &previous, props).await?;
            let kind = string_of(props, "Type").unwrap_or_else(|| "String".into());
            let value = string_of(props, "Value").unwrap_or_default();
            Ok(Updated {
                physical_id: name.to_string(),
                attributes: attributes(&kind, &value),
                replaced: false,
            })
        })
    }

    fn delete<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Deleted, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            let result = retry(&self.retry, "DeleteParameter", || async {
                self.client
                    .delete_parameter()
                    .name(name)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("DeleteParameter", e))
            })
            .await;
            Deleted::unless_missing(result)
        })
    }

    fn import<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<Imported, ProviderError>> {
        Box::pin(async move {
            let Some(name) = request.explicit_or_named("Name") else {
                return Ok(Imported::NotDeployedYet);
            };
            Ok(match self.get(&name).await? {
                Some((kind, value, _)) => Imported::Found {
                    physical_id: name,
                    attributes: attributes(&kind, &value),
                },
                None => Imported::NotDeployedYet,
            })
        })
    }

    fn read_current_state<'a>(
        &'a self,
        request: &'a ResourceRequest,
    ) -> BoxFuture<'a, Result<CurrentState, ProviderError>> {
        Box::pin(async move {
            let name = request.require_physical_id()?;
            let Some((kind, value, data_type)) = self.get(name).await? else {
                return Ok(CurrentState::NotFound);
            };
            let mut state = Properties::new();
            state.insert("Name".into(), json!(name));
            state.insert("Type".into(), json!(kind));
            state.insert("Value".into(), json!(value));

            let filter = ParameterStringFilter::builder()
                .key("Name")
                .option("Equals")
                .values(name)
                .build()
                .map_err(|e| ProviderError::Other(format!("ParameterStringFilter: {e}")))?;
            let described = retry(&self.retry, "DescribeParameters", || async {
                self.client
                    .describe_parameters()
                    .parameter_filters(filter.clone())
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("DescribeParameters", e))
            })
            .await?;
            if let Some(meta) = described
                .parameters()
                .iter()
                .find(|p| p.name() == Some(name))
            {
                if let Some(d) = meta.description() {
                    state.insert("Description".into(), json!(d));
                }
                if let Some(p) = meta.allowed_pattern() {
                    state.insert("AllowedPattern".into(), json!(p));
                }
                if let Some(t) = meta.tier()
                    && *t != ParameterTier::Standard
                {
                    state.insert("Tier".into(), json!(t.as_str()));
                }
            }
            if let Some(d) = data_type
                && d != "text"
            {
                state.insert("DataType".into(), json!(d));
            }

            let tags = retry(&self.retry, "ListTagsForResource", || async {
                self.client
                    .list_tags_for_resource()
                    .resource_type(ResourceTypeForTagging::Parameter)
                    .resource_id(name)
                    .send()
                    .await
                    .map_err(|e| ProviderError::from_sdk("ListTagsForResource", e))
            })
            .await?;
            let tags: Map<String, Value> = tags
                .tag_list()
                .iter()
                .map(|t| (t.key().to_string(), json!(t.value())))
                .collect();
            if !tags.is_empty() {
                state.insert("Tags".into(), Value::Object(tags));
            }
            Ok(CurrentState::Found(state))
        })
    }
}
