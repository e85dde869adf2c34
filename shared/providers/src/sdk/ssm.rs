//! `AWS::SSM::Parameter` through the SSM API.
//!
//! The physical id is the parameter's name. Without a `Name` in the template the name is
//! generated ([`crate::names::physical_name`]); such a name is ours alone, so a create that
//! finds it taken (a retry after a lost answer) overwrites it. A name the template gives
//! is never taken over: it is looked up before the call, and a taken one is
//! [`ProviderError::AlreadyExists`] saying so (`SdkResource::name_taken`). A new parameter
//! is tagged with the create's mark ([`crate::sdk::marks`]): when `PutParameter` without
//! `Overwrite` finds a name that was free at the check taken, the parameter is overwritten
//! only if it carries that mark (this create's earlier attempt, whose answer was lost);
//! else it is someone else's, refused untouched.
//!
//! `read_current_state` reports `Name`, `Type`, `Value`, `Description` and
//! `AllowedPattern` when set, `Tier` and `DataType` only when they differ from AWS's
//! defaults (`Standard`, `text`), and `Tags` (a map, as in the template) when there are any.

use std::collections::BTreeMap;

use aws_sdk_ssm::Client;
use aws_sdk_ssm::types::{
    ParameterStringFilter, ParameterTier, ParameterType, ResourceTypeForTagging, Tag,
};
use serde_json::{Map, Value, json};

use super::common::marks::{carries_own_mark, check_made, is_mark, own_mark};
use super::common::{
    SdkResource, Tagging, call, context, keep_name, missing_as_none, sdk_provider, sdk_tags,
    string_of, tagging, value_string,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};

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

sdk_provider! {
    /// The `AWS::SSM::Parameter` provider.
    SsmParameterProvider(Client), "AWS::SSM::Parameter", HANDLED
}

/// What `GetParameter` tells of a parameter: its type, value and data type.
pub(crate) struct Parameter {
    kind: String,
    value: String,
    data_type: Option<String>,
}

impl SsmParameterProvider {
    /// Writes the parameter (`overwrite`: an existing one is replaced; tags, and the create's
    /// `mark`, only on a new one).
    async fn put(
        &self,
        name: &str,
        props: &Properties,
        overwrite: bool,
        mark: Option<(String, String)>,
    ) -> Result<(), ProviderError> {
        let value = string_of(props, "Value").ok_or_else(|| {
            ProviderError::InvalidRequest(format!("{TYPE} {name}: Value is required"))
        })?;
        let kind = kind_of(props);
        let tags = if overwrite {
            Vec::new()
        } else {
            let mut tags = tag_map(props);
            tags.extend(mark);
            ssm_tags(tags)?
        };
        call(&self.retry, "PutParameter", || {
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
        })
        .await?;
        Ok(())
    }

    /// The parameter's tags, as (key, value).
    async fn tag_pairs(&self, name: &str) -> Result<Vec<(String, String)>, ProviderError> {
        let tags = self.tags(name).await?;
        Ok(tags
            .into_iter()
            .map(|(k, v)| (k, value_string(&v)))
            .collect())
    }

    /// The parameter's tags, as a `Key: Value` object.
    async fn tags(&self, name: &str) -> Result<Map<String, Value>, ProviderError> {
        let tags = call(&self.retry, "ListTagsForResource", || {
            self.client
                .list_tags_for_resource()
                .resource_type(ResourceTypeForTagging::Parameter)
                .resource_id(name)
                .send()
        })
        .await?;
        Ok(tags
            .tag_list()
            .iter()
            .map(|t| (t.key().to_string(), json!(t.value())))
            .collect())
    }

    /// The parameter's description, tier and pattern, from `DescribeParameters`.
    async fn describe(&self, name: &str, state: &mut Properties) -> Result<(), ProviderError> {
        let filter = ParameterStringFilter::builder()
            .key("Name")
            .option("Equals")
            .values(name)
            .build()
            .map_err(|e| ProviderError::Other(format!("ParameterStringFilter: {e}")))?;
        let described = call(&self.retry, "DescribeParameters", || {
            self.client
                .describe_parameters()
                .parameter_filters(filter.clone())
                .send()
        })
        .await?;
        let Some(meta) = described
            .parameters()
            .iter()
            .find(|p| p.name() == Some(name))
        else {
            return Ok(());
        };
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
        Ok(())
    }
}

fn attributes(kind: &str, value: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Type".into(), json!(kind));
    a.insert("Value".into(), json!(value));
    a
}

/// The parameter's `Type` (`String` when the template gives none).
fn kind_of(props: &Properties) -> String {
    string_of(props, "Type").unwrap_or_else(|| "String".into())
}

/// The template's `Tags` (a map) with string values.
fn tag_map(props: &Properties) -> BTreeMap<String, String> {
    props
        .get("Tags")
        .and_then(Value::as_object)
        .map(|tags| {
            tags.iter()
                .map(|(k, v)| (k.clone(), value_string(v)))
                .collect()
        })
        .unwrap_or_default()
}

/// The SSM tags of `tags`.
fn ssm_tags(tags: impl IntoIterator<Item = (String, String)>) -> Result<Vec<Tag>, ProviderError> {
    sdk_tags(TYPE, tags, |k, v| Tag::builder().key(k).value(v).build())
}

impl SdkResource for SsmParameterProvider {
    type Found = Parameter;
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "Name";
    const NOUN: &'static str = "parameter";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let (name, generated) = given_or_generated(request, "Name", NAME_RULES);
        // A name the template gives is looked up once, before the call (outside its
        // retries): taken, it is someone else's and refused; free, a create that then
        // finds it taken met its own earlier attempt, whose answer was lost.
        crate::sdk::common::refuse_taken::<Self, _>(&name, generated, self.find(&name)).await?;
        match self.put(&name, props, false, own_mark(request)).await {
            Ok(()) => {}
            Err(ProviderError::AlreadyExists(_)) => {
                // Taken after the check: by this create's earlier attempt, which left its
                // mark, or by someone else, whose parameter is not overwritten.
                if !generated {
                    check_made(request, &name, || self.tag_pairs(&name)).await?;
                }
                self.put(&name, props, true, None).await?;
                self.sync_tags(&name, &BTreeMap::new(), &tag_map(props))
                    .await?;
            }
            Err(e) => return Err(e.context(context(request, TYPE))),
        }
        let value = string_of(props, "Value").unwrap_or_default();
        Ok(Created {
            sensitive: false,
            attributes: attributes(&kind_of(props), &value),
            physical_id: name,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let name = request.require_physical_id()?;
        keep_name(request, TYPE, "Name", name, "parameter")?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        self.put(name, props, true, None).await?;
        self.sync_tags(name, &tag_map(&previous), &tag_map(props))
            .await?;
        let value = string_of(props, "Value").unwrap_or_default();
        Ok(Updated {
            sensitive: false,
            physical_id: name.to_string(),
            attributes: attributes(&kind_of(props), &value),
            replaced: false,
        })
    }

    async fn remove(&self, name: &str) -> Result<(), ProviderError> {
        let deleted = call(&self.retry, "DeleteParameter", || {
            self.client.delete_parameter().name(name).send()
        });
        deleted.await.map(drop)
    }

    /// `GetParameter`, or `None` when the parameter does not exist.
    async fn find(&self, name: &str) -> Result<Option<Parameter>, ProviderError> {
        let got = call(&self.retry, "GetParameter", || {
            self.client.get_parameter().name(name).send()
        })
        .await;
        Ok(missing_as_none(got)?.map(|out| {
            let p = out.parameter();
            Parameter {
                kind: p
                    .and_then(|p| p.r#type())
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                value: p.and_then(|p| p.value()).unwrap_or_default().to_string(),
                data_type: p.and_then(|p| p.data_type()).map(str::to_string),
            }
        }))
    }

    fn attributes(&self, _name: &str, found: &Parameter) -> Attributes {
        attributes(&found.kind, &found.value)
    }

    async fn made_by(&self, request: &ResourceRequest) -> Result<bool, ProviderError> {
        let name = request.require_physical_id()?;
        Ok(carries_own_mark(&self.tag_pairs(name).await?, request))
    }

    /// `GetParameter`, `DescribeParameters` and `ListTagsForResource` at once: each needs
    /// only the name.
    async fn read(&self, request: &ResourceRequest) -> Result<CurrentState, ProviderError> {
        let name = request.require_physical_id()?;
        let mut described = Properties::new();
        let (found, listed, tags) = tokio::join!(
            self.find(name),
            self.describe(name, &mut described),
            self.tags(name)
        );
        match found? {
            Some(found) => {
                listed?;
                Ok(state_of(name, found, described, tags?))
            }
            None => Ok(CurrentState::NotFound),
        }
    }

    async fn state(&self, name: &str, found: Parameter) -> Result<CurrentState, ProviderError> {
        let mut described = Properties::new();
        let (listed, tags) = tokio::join!(self.describe(name, &mut described), self.tags(name));
        listed?;
        Ok(state_of(name, found, described, tags?))
    }
}

/// The state of parameter `name`: what `GetParameter` found, what `DescribeParameters`
/// added (`described`) and its tags.
fn state_of(
    name: &str,
    found: Parameter,
    described: Properties,
    tags: Map<String, Value>,
) -> CurrentState {
    let mut state = Properties::new();
    state.insert("Name".into(), json!(name));
    state.insert("Type".into(), json!(found.kind));
    state.insert("Value".into(), json!(found.value));
    state.extend(described);
    if let Some(d) = found.data_type
        && d != "text"
    {
        state.insert("DataType".into(), json!(d));
    }
    let tags: Map<String, Value> = tags.into_iter().filter(|(k, _)| !is_mark(k)).collect();
    if !tags.is_empty() {
        state.insert("Tags".into(), Value::Object(tags));
    }
    CurrentState::Found(state)
}

tagging! {
    SsmParameterProvider, ProviderError::from_sdk,
    "RemoveTagsFromResource" => |client, name, keys| client
        .remove_tags_from_resource()
        .resource_type(ResourceTypeForTagging::Parameter)
        .resource_id(name)
        .set_tag_keys(Some(keys)),
    "AddTagsToResource" => |client, name, tags| client
        .add_tags_to_resource()
        .resource_type(ResourceTypeForTagging::Parameter)
        .resource_id(name)
        .set_tags(Some(ssm_tags(tags)?)),
}
