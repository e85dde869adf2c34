//! `AWS::Lambda::Function` through the Lambda API.
//!
//! The physical id (and `Ref`) is the function name; the attribute is `Arn`. Without a
//! `FunctionName` the name is generated ([`crate::names::physical_name`], at most 64
//! characters of letters, digits, `-` and `_`); such a name is ours alone, so a create that
//! finds it taken (a retry after a lost answer) adopts the function and writes its code and
//! configuration again. A name the template gives is never taken over: `CreateFunction`
//! refuses a taken one, which is [`ProviderError::AlreadyExists`] saying so
//! (`SdkResource::name_taken`).
//!
//! `Code` is either `ZipFile` (inline source, zipped here as `index.js` for Node.js
//! runtimes or `index.py` for Python ones, as CloudFormation does; see [`zip_single_file`])
//! or `S3Bucket`/`S3Key`/`S3ObjectVersion`. Only `.zip` packages are handled.
//!
//! A role made moments before is often not yet assumable by Lambda: `CreateFunction` then
//! answers "The role defined for the function cannot be assumed by Lambda", which is a
//! [`ProviderError::IamPropagation`] (retried on the dense schedule).
//!
//! Update changes code (`UpdateFunctionCode`, with `Architectures`) and configuration
//! (`UpdateFunctionConfiguration`) separately, each only when it changed, waiting after
//! each for the function to leave `Pending`/`InProgress` (Lambda refuses a second change
//! while one is in progress); only `FunctionName` needs a new function.
//!
//! `read_current_state` reports `FunctionName`, `Runtime`, `Handler`, `Role`, `Description`
//! unless empty, `Timeout` unless 3, `MemorySize` unless 128, `Architectures` unless
//! `["x86_64"]`, `Environment` when it has variables, and `Tags` (a `Key`/`Value` list sorted
//! by key, `aws:` keys left out) when there are any. `Code` is not reported: Lambda gives
//! back only a download link and a hash, never the template's `ZipFile` or S3 location.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_lambda::Client;
use aws_sdk_lambda::error::ProvideErrorMetadata;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::{
    Architecture, Environment, FunctionCode, FunctionConfiguration, LastUpdateStatus, Runtime,
    State,
};
use serde_json::{Value, json};

use super::common::{
    self, SdkResource, Tagging, call, context, insert_tags, keep_name, missing_as_none,
    sdk_provider, string_or_number_of, tag_pairs, tagging, value_string,
};
use crate::error::ProviderError;
use crate::names::{NameRules, given_or_generated};
use crate::provider::{Attributes, Created, CurrentState};
use crate::provider::{Properties, ResourceRequest, Updated};
use crate::retry::retry;

const HANDLED: &[&str] = &[
    "FunctionName",
    "Runtime",
    "Handler",
    "Role",
    "Code",
    "Timeout",
    "MemorySize",
    "Environment",
    "Description",
    "Architectures",
    "Tags",
];

/// The keys of `Code` this provider handles.
const CODE_KEYS: &[&str] = &["ZipFile", "S3Bucket", "S3Key", "S3ObjectVersion"];

/// The configuration properties (changed together by `UpdateFunctionConfiguration`).
const CONFIG_KEYS: &[&str] = &[
    "Runtime",
    "Handler",
    "Role",
    "Timeout",
    "MemorySize",
    "Environment",
    "Description",
];

/// Function names: letters, digits, `-` and `_`, at most 64 characters.
const NAME_RULES: NameRules = NameRules {
    max_len: 64,
    extra: "-_",
    lowercase: false,
};

pub(crate) const DEFAULT_TIMEOUT: i32 = 3;
pub(crate) const DEFAULT_MEMORY: i32 = 128;

/// How long to wait for a function to settle after a create or an update.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(300);

sdk_provider! {
    /// The `AWS::Lambda::Function` provider.
    LambdaFunctionProvider(Client), "AWS::Lambda::Function", HANDLED
}

fn invalid(what: &str) -> ProviderError {
    common::invalid(TYPE, what)
}

/// CRC-32 (IEEE 802.3, reflected, as zip uses it), table-driven.
fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc = TABLE[((crc ^ u32::from(b)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

/// A zip archive holding one file `name` with `content`, stored (not compressed), dated
/// 1980-01-01 and readable by all, so the same source always makes the same bytes (and
/// the same `CodeSha256`).
pub fn zip_single_file(name: &str, content: &[u8]) -> Result<Vec<u8>, ProviderError> {
    let too_big = || invalid("inline code too large for a zip archive");
    let size = u32::try_from(content.len()).map_err(|_| too_big())?;
    let name_len = u16::try_from(name.len()).map_err(|_| too_big())?;
    let crc = crc32(content);
    const VERSION_NEEDED: u16 = 20;
    const VERSION_MADE_BY: u16 = (3 << 8) | 20; // Unix, zip 2.0
    const DOS_TIME: u16 = 0;
    const DOS_DATE: u16 = (1 << 5) | 1; // 1980-01-01
    let mut out = Vec::with_capacity(content.len() + 2 * name.len() + 100);
    let u16le = |out: &mut Vec<u8>, v: u16| out.extend_from_slice(&v.to_le_bytes());
    let u32le = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());

    // The fields a local header and a central directory header share, from the version
    // needed to extract on: flags, method (stored), time, date, CRC, sizes, name length
    // and extra length.
    let entry = |out: &mut Vec<u8>| {
        u16le(out, VERSION_NEEDED);
        for v in [0, 0, DOS_TIME, DOS_DATE] {
            u16le(out, v);
        }
        for v in [crc, size, size] {
            u32le(out, v);
        }
        u16le(out, name_len);
        u16le(out, 0);
    };

    // Local file header.
    u32le(&mut out, 0x0403_4b50);
    entry(&mut out);
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(content);

    // Central directory.
    let central_start = u32::try_from(out.len()).map_err(|_| too_big())?;
    u32le(&mut out, 0x0201_4b50);
    u16le(&mut out, VERSION_MADE_BY);
    entry(&mut out);
    u16le(&mut out, 0); // comment length
    u16le(&mut out, 0); // disk number
    u16le(&mut out, 0); // internal attributes
    u32le(&mut out, 0o100_644 << 16); // external attributes: a regular file, rw-r--r--
    u32le(&mut out, 0); // offset of the local header
    out.extend_from_slice(name.as_bytes());
    let central_size = u32::try_from(out.len()).map_err(|_| too_big())? - central_start;

    // End of central directory.
    u32le(&mut out, 0x0605_4b50);
    u16le(&mut out, 0); // this disk
    u16le(&mut out, 0); // disk with the central directory
    u16le(&mut out, 1); // entries on this disk
    u16le(&mut out, 1); // entries
    u32le(&mut out, central_size);
    u32le(&mut out, central_start);
    u16le(&mut out, 0); // comment length
    Ok(out)
}

fn string_of(props: &Properties, key: &str) -> Option<String> {
    string_or_number_of(props, key)
}

fn int_of(props: &Properties, key: &str) -> Result<Option<i32>, ProviderError> {
    common::int_of(TYPE, props, key)
}

/// `Code` of the template as a `FunctionCode` (the zip built for `ZipFile`).
fn code_of(props: &Properties) -> Result<FunctionCode, ProviderError> {
    let code = props
        .get("Code")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("Code is required (an object)"))?;
    if let Some(key) = code.keys().find(|k| !CODE_KEYS.contains(&k.as_str())) {
        return Err(invalid(&format!(
            "Code.{key} is not handled by the SDK provider (handled: {})",
            CODE_KEYS.join(", ")
        )));
    }
    let text = |key: &str| code.get(key).and_then(Value::as_str).map(str::to_string);
    if let Some(source) = text("ZipFile") {
        let runtime = string_of(props, "Runtime").unwrap_or_default();
        let file = if runtime.starts_with("nodejs") {
            "index.js"
        } else if runtime.starts_with("python") {
            "index.py"
        } else {
            return Err(invalid(&format!(
                "Code.ZipFile needs a Node.js or Python runtime, not {runtime:?}"
            )));
        };
        let zip = zip_single_file(file, source.as_bytes())?;
        return Ok(FunctionCode::builder().zip_file(Blob::new(zip)).build());
    }
    match (text("S3Bucket"), text("S3Key")) {
        (Some(bucket), Some(key)) => Ok(FunctionCode::builder()
            .s3_bucket(bucket)
            .s3_key(key)
            .set_s3_object_version(text("S3ObjectVersion"))
            .build()),
        _ => Err(invalid("Code needs ZipFile, or S3Bucket and S3Key")),
    }
}

fn environment_of(props: &Properties) -> Result<HashMap<String, String>, ProviderError> {
    let Some(env) = props.get("Environment") else {
        return Ok(HashMap::new());
    };
    let Some(vars) = env.get("Variables") else {
        return Ok(HashMap::new());
    };
    vars.as_object()
        .ok_or_else(|| invalid("Environment.Variables must be an object"))?
        .iter()
        .map(|(k, v)| Ok((k.clone(), value_string(v))))
        .collect()
}

fn architectures_of(props: &Properties) -> Result<Option<Vec<Architecture>>, ProviderError> {
    let Some(list) = props.get("Architectures") else {
        return Ok(None);
    };
    list.as_array()
        .ok_or_else(|| invalid("Architectures must be a list"))?
        .iter()
        .map(|a| {
            a.as_str()
                .map(Architecture::from)
                .ok_or_else(|| invalid("Architectures must be a list of strings"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn tag_map(props: &Properties) -> Result<BTreeMap<String, String>, ProviderError> {
    Ok(tag_pairs(TYPE, props)?.into_iter().collect())
}

fn attributes(arn: &str) -> Attributes {
    let mut a = Attributes::new();
    a.insert("Arn".into(), json!(arn));
    a
}

/// The function's ARN without a version or alias qualifier.
fn unqualified_arn(config: &FunctionConfiguration) -> String {
    unqualified(config.function_arn().unwrap_or_default())
}

/// A function ARN without its qualifier.
fn unqualified(arn: &str) -> String {
    // arn:aws:lambda:region:account:function:name[:qualifier]
    arn.split(':').take(7).collect::<Vec<_>>().join(":")
}

/// Whether a function in `state` whose last update is `update` has settled (neither
/// `Pending` nor `InProgress`); a failed one is an error with `reason`.
fn has_settled(
    name: &str,
    state: Option<&State>,
    update: Option<&LastUpdateStatus>,
    reason: Option<&str>,
) -> Result<bool, ProviderError> {
    if state == Some(&State::Failed) || update == Some(&LastUpdateStatus::Failed) {
        return Err(ProviderError::Other(format!(
            "{TYPE} {name} failed: {}",
            reason.unwrap_or("no reason given")
        )));
    }
    Ok(state != Some(&State::Pending) && update != Some(&LastUpdateStatus::InProgress))
}

/// All the configuration a `FunctionConfiguration` update writes, from `props` (absent
/// properties back to AWS's defaults).
struct Settings {
    runtime: Option<String>,
    handler: Option<String>,
    role: String,
    timeout: i32,
    memory: i32,
    environment: HashMap<String, String>,
    description: String,
}

/// `$request` (a `CreateFunction` or an `UpdateFunctionConfiguration`) with the settings
/// `$settings` both take the same way: runtime, handler, role, timeout and memory.
macro_rules! with_settings {
    ($request:expr, $settings:expr) => {
        $request
            .set_runtime($settings.runtime.as_deref().map(Runtime::from))
            .set_handler($settings.handler.clone())
            .role(&$settings.role)
            .timeout($settings.timeout)
            .memory_size($settings.memory)
    };
}

fn settings_of(props: &Properties) -> Result<Settings, ProviderError> {
    Ok(Settings {
        runtime: string_of(props, "Runtime"),
        handler: string_of(props, "Handler"),
        role: string_of(props, "Role").ok_or_else(|| invalid("Role is required"))?,
        timeout: int_of(props, "Timeout")?.unwrap_or(DEFAULT_TIMEOUT),
        memory: int_of(props, "MemorySize")?.unwrap_or(DEFAULT_MEMORY),
        environment: environment_of(props)?,
        description: string_of(props, "Description").unwrap_or_default(),
    })
}

impl LambdaFunctionProvider {
    /// Waits until the function is neither `Pending` nor `InProgress`; its configuration.
    async fn settle(&self, name: &str) -> Result<FunctionConfiguration, ProviderError> {
        let started = tokio::time::Instant::now();
        let mut delay = Duration::from_millis(100);
        loop {
            let (config, _) = self.find(name).await?.ok_or_else(|| {
                ProviderError::NotFound(format!("{TYPE} {name} vanished while settling"))
            })?;
            let reason = config.last_update_status_reason().or(config.state_reason());
            if has_settled(name, config.state(), config.last_update_status(), reason)? {
                return Ok(config);
            }
            if started.elapsed() >= SETTLE_TIMEOUT {
                return Err(ProviderError::Timeout(format!(
                    "{TYPE} {name} still pending after {SETTLE_TIMEOUT:?}"
                )));
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    }

    /// The ARN of the function `name` once settled: `answer` (the ARN, state, last update
    /// status and reason a write answered) when it says so already, else waited for.
    async fn settled_arn(
        &self,
        name: &str,
        answer: (
            Option<&str>,
            Option<&State>,
            Option<&LastUpdateStatus>,
            Option<&str>,
        ),
    ) -> Result<String, ProviderError> {
        let (arn, state, update, reason) = answer;
        match arn {
            Some(arn) if has_settled(name, state, update, reason)? => Ok(unqualified(arn)),
            _ => Ok(unqualified_arn(&self.settle(name).await?)),
        }
    }

    /// Writes the function's code (`code`: `UpdateFunctionCode`, with `Architectures`) and
    /// its configuration (`configuration`: `UpdateFunctionConfiguration`) from `props`,
    /// waiting after each for the function to settle (not when its answer says it has):
    /// the function's ARN after the last write, `None` when nothing was written.
    async fn update_function(
        &self,
        name: &str,
        props: &Properties,
        code: bool,
        configuration: bool,
    ) -> Result<Option<String>, ProviderError> {
        let mut arn = None;
        if code {
            let code = code_of(props)?;
            let architectures = architectures_of(props)?;
            let out = call(&self.retry, "UpdateFunctionCode", || {
                self.client
                    .update_function_code()
                    .function_name(name)
                    .set_zip_file(code.zip_file().cloned())
                    .set_s3_bucket(code.s3_bucket().map(str::to_string))
                    .set_s3_key(code.s3_key().map(str::to_string))
                    .set_s3_object_version(code.s3_object_version().map(str::to_string))
                    .set_architectures(architectures.clone())
                    .send()
            })
            .await?;
            let answer = (
                out.function_arn(),
                out.state(),
                out.last_update_status(),
                out.last_update_status_reason().or(out.state_reason()),
            );
            arn = Some(self.settled_arn(name, answer).await?);
        }
        if configuration {
            let s = settings_of(props)?;
            let environment = Environment::builder()
                .set_variables(Some(s.environment.clone()))
                .build();
            let out = call(&self.retry, "UpdateFunctionConfiguration", || {
                let update = self.client.update_function_configuration();
                with_settings!(update.function_name(name), s)
                    .environment(environment.clone())
                    .description(&s.description)
                    .send()
            })
            .await?;
            let answer = (
                out.function_arn(),
                out.state(),
                out.last_update_status(),
                out.last_update_status_reason().or(out.state_reason()),
            );
            arn = Some(self.settled_arn(name, answer).await?);
        }
        Ok(arn)
    }

    /// `CreateFunction`: `Some` of its answer (the ARN, whether it has settled) when made
    /// now, `None` when the name is taken.
    async fn create_function(
        &self,
        name: &str,
        props: &Properties,
    ) -> Result<Option<(String, bool)>, ProviderError> {
        let code = code_of(props)?;
        let s = settings_of(props)?;
        let architectures = architectures_of(props)?;
        let tags: HashMap<String, String> = tag_map(props)?.into_iter().collect();
        retry(&self.retry, "CreateFunction", || async {
            let create = self.client.create_function();
            let sent = with_settings!(create.function_name(name), s)
                .code(code.clone())
                .set_environment((!s.environment.is_empty()).then(|| {
                    Environment::builder()
                        .set_variables(Some(s.environment.clone()))
                        .build()
                }))
                .set_description((!s.description.is_empty()).then(|| s.description.clone()))
                .set_architectures(architectures.clone())
                .set_tags((!tags.is_empty()).then(|| tags.clone()))
                .send()
                .await;
            match sent {
                Ok(out) => {
                    let reason = out.last_update_status_reason().or(out.state_reason());
                    let settled = has_settled(name, out.state(), out.last_update_status(), reason)?;
                    let arn = out.function_arn().unwrap_or_default();
                    Ok(Some((unqualified(arn), settled && !arn.is_empty())))
                }
                // Lambda answers a taken name with the same code as a change in progress;
                // only the message tells them apart.
                Err(e)
                    if e.as_service_error().is_some_and(|s| {
                        s.is_resource_conflict_exception()
                            && s.message()
                                .is_some_and(|m| m.to_ascii_lowercase().contains("already exist"))
                    }) =>
                {
                    Ok(None)
                }
                Err(e) => Err(ProviderError::from_sdk("CreateFunction", e)),
            }
        })
        .await
    }
}

impl SdkResource for LambdaFunctionProvider {
    type Found = (FunctionConfiguration, HashMap<String, String>);
    const TYPE: &'static str = TYPE;
    const NAME_PROPERTY: &'static str = "FunctionName";
    const NOUN: &'static str = "function";

    async fn create(&self, request: &ResourceRequest) -> Result<Created, ProviderError> {
        let props = &request.properties;
        let in_context = |e: ProviderError| e.context(context(request, TYPE));
        let (name, generated) = given_or_generated(request, "FunctionName", NAME_RULES);
        // A name the template gives is looked up once, before the call (outside its
        // retries): taken, it is someone else's and refused; free, a create that then
        // finds it taken met its own earlier attempt, whose answer was lost.
        crate::sdk::common::refuse_taken::<Self, _>(&name, generated, self.find(&name)).await?;
        let made = self
            .create_function(&name, props)
            .await
            .map_err(in_context)?;
        let arn = match made {
            // CreateFunction answers the new function: waited for while it is Pending.
            Some((arn, true)) => arn,
            Some((_, false)) => unqualified_arn(&self.settle(&name).await.map_err(in_context)?),
            None => {
                // Our own function from an earlier attempt: write everything again.
                let adopt = async {
                    self.settle(&name).await?;
                    let written = self.update_function(&name, props, true, true).await?;
                    let arn = written.unwrap_or_default();
                    self.sync_tags(&arn, &BTreeMap::new(), &tag_map(props)?)
                        .await?;
                    Ok::<_, ProviderError>(arn)
                };
                adopt.await.map_err(in_context)?
            }
        };
        Ok(Created {
            sensitive: false,
            attributes: attributes(&arn),
            physical_id: name,
        })
    }

    async fn update(&self, request: &ResourceRequest) -> Result<Updated, ProviderError> {
        let name = request.require_physical_id()?;
        keep_name(request, TYPE, "FunctionName", name, "function")?;
        let props = &request.properties;
        let previous = request.previous_properties.clone().unwrap_or_default();
        let changed = |key: &str| previous.get(key) != props.get(key);
        let work = async {
            let before = self.settle(name).await?;
            let code = changed("Code") || changed("Architectures");
            let configuration = CONFIG_KEYS.iter().any(|k| changed(k));
            let written = self
                .update_function(name, props, code, configuration)
                .await?;
            // The function has settled after each write (its ARN does not change).
            let arn = written.unwrap_or_else(|| unqualified_arn(&before));
            self.sync_tags(&arn, &tag_map(&previous)?, &tag_map(props)?)
                .await?;
            Ok::<_, ProviderError>(arn)
        };
        let arn = work.await.map_err(|e| e.context(context(request, TYPE)))?;
        Ok(Updated {
            sensitive: false,
            physical_id: name.to_string(),
            attributes: attributes(&arn),
            replaced: false,
        })
    }

    async fn remove(&self, name: &str) -> Result<(), ProviderError> {
        call(&self.retry, "DeleteFunction", || {
            self.client.delete_function().function_name(name).send()
        })
        .await
        .map(drop)
    }

    /// `GetFunction`: configuration and tags, or `None` when the function does not exist.
    async fn find(&self, name: &str) -> Result<Option<Self::Found>, ProviderError> {
        let got = call(&self.retry, "GetFunction", || {
            self.client.get_function().function_name(name).send()
        })
        .await;
        Ok(missing_as_none(got)?.and_then(|out| {
            let tags = out.tags().cloned().unwrap_or_default();
            out.configuration().cloned().map(|c| (c, tags))
        }))
    }

    fn attributes(&self, _name: &str, (config, _): &Self::Found) -> Attributes {
        attributes(&unqualified_arn(config))
    }

    /// The function's own name (an ARN given as the id is answered with the name).
    fn physical_id(name: String, (config, _): &Self::Found) -> String {
        config.function_name().map_or(name, str::to_string)
    }

    async fn state(&self, name: &str, found: Self::Found) -> Result<CurrentState, ProviderError> {
        let (config, tags) = found;
        let mut state = Properties::new();
        state.insert(
            "FunctionName".into(),
            json!(config.function_name().unwrap_or(name)),
        );
        if let Some(r) = config.runtime() {
            state.insert("Runtime".into(), json!(r.as_str()));
        }
        if let Some(h) = config.handler() {
            state.insert("Handler".into(), json!(h));
        }
        if let Some(r) = config.role() {
            state.insert("Role".into(), json!(r));
        }
        if let Some(d) = config.description()
            && !d.is_empty()
        {
            state.insert("Description".into(), json!(d));
        }
        if let Some(t) = config.timeout()
            && t != DEFAULT_TIMEOUT
        {
            state.insert("Timeout".into(), json!(t));
        }
        if let Some(m) = config.memory_size()
            && m != DEFAULT_MEMORY
        {
            state.insert("MemorySize".into(), json!(m));
        }
        let archs: Vec<&str> = config.architectures().iter().map(|a| a.as_str()).collect();
        if !archs.is_empty() && archs != ["x86_64"] {
            state.insert("Architectures".into(), json!(archs));
        }
        if let Some(vars) = config.environment().and_then(|e| e.variables())
            && !vars.is_empty()
        {
            let sorted: BTreeMap<&String, &String> = vars.iter().collect();
            state.insert("Environment".into(), json!({"Variables": sorted}));
        }
        insert_tags(
            &mut state,
            tags.into_iter().filter(|(k, _)| !k.starts_with("aws:")),
        );
        Ok(CurrentState::Found(state))
    }
}

tagging! {
    LambdaFunctionProvider, ProviderError::from_sdk,
    "UntagResource" => |client, arn, keys| {
        client.untag_resource().resource(arn).set_tag_keys(Some(keys))
    },
    "TagResource" => |client, arn, tags| {
        client.tag_resource().resource(arn).set_tags(Some(tags.into_iter().collect()))
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdk::common::testing::props;

    #[test]
    fn crc32_matches_the_reference_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn zip_has_the_right_structure() {
        let content = b"exports.handler = async () => 'ok';";
        let zip = zip_single_file("index.js", content).expect("zip");
        assert_eq!(&zip[..4], &[0x50, 0x4b, 0x03, 0x04]);
        // Local header (30) + name + content, central header (46) + name, end (22).
        assert_eq!(zip.len(), 30 + 8 + content.len() + 46 + 8 + 22);
        let end = &zip[zip.len() - 22..];
        assert_eq!(&end[..4], &[0x50, 0x4b, 0x05, 0x06]);
        let central_offset = u32::from_le_bytes([end[16], end[17], end[18], end[19]]) as usize;
        assert_eq!(
            &zip[central_offset..central_offset + 4],
            &[0x50, 0x4b, 0x01, 0x02]
        );
        assert_eq!(&zip[30..38], b"index.js");
        assert_eq!(&zip[38..38 + content.len()], content);
        let crc = u32::from_le_bytes([zip[14], zip[15], zip[16], zip[17]]);
        assert_eq!(crc, crc32(content));
        // Deterministic.
        assert_eq!(zip, zip_single_file("index.js", content).expect("zip"));
    }

    #[test]
    fn code_needs_a_known_shape() {
        assert!(
            code_of(&props(
                json!({"Runtime": "python3.12", "Code": {"ZipFile": "x"}})
            ))
            .is_ok()
        );
        assert!(
            code_of(&props(json!({"Code": {"S3Bucket": "b", "S3Key": "k"}})))
                .is_ok_and(|c| c.s3_key() == Some("k"))
        );
        assert!(
            code_of(&props(
                json!({"Runtime": "java21", "Code": {"ZipFile": "x"}})
            ))
            .is_err()
        );
        assert!(code_of(&props(json!({"Code": {"ImageUri": "x"}}))).is_err());
        assert!(code_of(&props(json!({}))).is_err());
    }

    #[test]
    fn arn_without_qualifier() {
        let config = FunctionConfiguration::builder()
            .function_arn("arn:aws:lambda:us-east-1:123456789012:function:f:$LATEST")
            .build();
        assert_eq!(
            unqualified_arn(&config),
            "arn:aws:lambda:us-east-1:123456789012:function:f"
        );
    }

    #[test]
    fn a_write_answer_says_whether_the_function_settled() {
        let settled = |state, update| has_settled("f", state, update, Some("why"));
        assert_eq!(settled(Some(&State::Active), None), Ok(true));
        assert_eq!(settled(None, Some(&LastUpdateStatus::Successful)), Ok(true));
        assert_eq!(settled(Some(&State::Pending), None), Ok(false));
        assert_eq!(
            settled(Some(&State::Active), Some(&LastUpdateStatus::InProgress)),
            Ok(false)
        );
        let failed = settled(Some(&State::Active), Some(&LastUpdateStatus::Failed));
        assert!(
            matches!(&failed, Err(ProviderError::Other(m)) if m.contains("why")),
            "{failed:?}"
        );
    }
}
