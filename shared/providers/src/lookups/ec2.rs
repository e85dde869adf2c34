//! A minimal EC2 client for the one call stackflow makes, `DescribeAvailabilityZones`
//! (`Fn::GetAZs`), without `aws-sdk-ec2`, which takes long to compile: a SigV4-signed EC2
//! Query API request sent with hyper, and the zone names read out of the XML answer.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_types::SdkConfig;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::error_chain;
use crate::error::ProviderError;
use crate::retry::{RetryPolicy, retry};

/// How long one EC2 `DescribeAvailabilityZones` call may take, signing included.
pub const EC2_TIMEOUT: Duration = Duration::from_secs(10);

/// How the availability zones' lookup is retried: as a provider call, but each attempt
/// bounded by [`EC2_TIMEOUT`] and the whole by a minute (it runs before the deploy starts).
pub fn lookup_retry_policy() -> RetryPolicy {
    RetryPolicy {
        call_deadline: EC2_TIMEOUT,
        total_deadline: Duration::from_secs(60),
        ..RetryPolicy::default()
    }
}

/// The largest EC2 response body read (a region's zone list is a few kilobytes).
const EC2_MAX_BODY: usize = 1 << 20;

/// The EC2 Query API version whose `DescribeAvailabilityZones` is called.
const EC2_API_VERSION: &str = "2016-11-15";

type HttpsClient = HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>;
type PlainClient = HyperClient<HttpConnector, Full<Bytes>>;

/// A minimal EC2 client: `DescribeAvailabilityZones` only, as a SigV4-signed Query API
/// call (`POST /`, form-encoded body) sent with hyper.
///
/// The endpoint is the [`SdkConfig`]'s `endpoint_url` when set (a local emulator), else
/// `https://ec2.{region}.amazonaws.com` (`.amazonaws.com.cn` in the China regions).
#[derive(Clone)]
pub struct Ec2 {
    credentials: Option<SharedCredentialsProvider>,
    endpoint_url: Option<String>,
    https: std::sync::Arc<OnceLock<Result<HttpsClient, String>>>,
    plain: std::sync::Arc<OnceLock<PlainClient>>,
}

impl std::fmt::Debug for Ec2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ec2")
            .field("endpoint_url", &self.endpoint_url)
            .finish_non_exhaustive()
    }
}

impl Ec2 {
    /// An EC2 client with the credentials provider and endpoint of `config` (its region is
    /// not used: every call names its region).
    pub fn new(config: &SdkConfig) -> Self {
        Ec2 {
            credentials: config.credentials_provider(),
            endpoint_url: config.endpoint_url().map(str::to_string),
            https: Default::default(),
            plain: Default::default(),
        }
    }

    /// The URL requests for `region` go to.
    pub fn endpoint(&self, region: &str) -> String {
        match &self.endpoint_url {
            Some(url) => format!("{}/", url.trim_end_matches('/')),
            None if region.starts_with("cn-") => {
                format!("https://ec2.{region}.amazonaws.com.cn/")
            }
            None => format!("https://ec2.{region}.amazonaws.com/"),
        }
    }

    /// The names of the available availability zones of `region`, sorted. A throttling
    /// answer, a 5xx, a lost connection or no answer within [`EC2_TIMEOUT`] is retried
    /// with backoff (the SDK clients' policy, [`lookup_retry_policy`]); any other error
    /// fails at once.
    pub async fn availability_zones(&self, region: &str) -> Result<Vec<String>, String> {
        retry(
            &lookup_retry_policy(),
            "EC2 DescribeAvailabilityZones",
            || self.describe_availability_zones(region),
        )
        .await
        .map_err(|e| e.message().to_string())
    }

    async fn describe_availability_zones(
        &self,
        region: &str,
    ) -> Result<Vec<String>, ProviderError> {
        let url = self.endpoint(region);
        let uri: http::Uri = url.parse().map_err(|e| {
            ProviderError::InvalidRequest(format!("the EC2 endpoint {url} is not a valid URL: {e}"))
        })?;
        let request = self
            .signed_request(region, uri.clone())
            .await
            .map_err(ProviderError::InvalidRequest)?;
        let response = match uri.scheme_str() {
            Some("http") => self.plain_client().request(request).await,
            Some("https") => {
                self.https_client()
                    .map_err(ProviderError::Other)?
                    .request(request)
                    .await
            }
            other => {
                return Err(ProviderError::InvalidRequest(format!(
                    "the EC2 endpoint {url} has the scheme {other:?}; expected http or https"
                )));
            }
        }
        .map_err(|e| ProviderError::Transient(format!("EC2 {url}: {}", error_chain(&e))))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), EC2_MAX_BODY)
            .collect()
            .await
            .map_err(|e| {
                ProviderError::Transient(format!("EC2 {url}: reading the response failed: {e}"))
            })?
            .to_bytes();
        let body = String::from_utf8_lossy(&body);
        parse_describe_availability_zones(status.as_u16(), &body)
            .map_err(|message| answer_error(status.as_u16(), &body, message))
    }

    /// The `DescribeAvailabilityZones` request to `uri`, signed for `region`.
    async fn signed_request(
        &self,
        region: &str,
        uri: http::Uri,
    ) -> Result<http::Request<Full<Bytes>>, String> {
        let provider = self
            .credentials
            .as_ref()
            .ok_or("no AWS credentials are configured")?;
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|e| format!("no AWS credentials: {}", error_chain(&e)))?;
        let identity = credentials.into();

        let body = format!("Action=DescribeAvailabilityZones&Version={EC2_API_VERSION}");
        let host = match (uri.host(), uri.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            (None, _) => return Err(format!("the EC2 endpoint {uri} has no host")),
        };
        let content_type = "application/x-www-form-urlencoded; charset=utf-8";
        let mut request = http::Request::builder()
            .method(http::Method::POST)
            .uri(uri.clone())
            .header(http::header::HOST, &host)
            .header(http::header::CONTENT_TYPE, content_type)
            .body(Full::new(Bytes::from(body.clone())))
            .map_err(|e| format!("cannot build the EC2 request: {e}"))?;

        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name("ec2")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| format!("cannot sign the EC2 request: {e}"))?
            .into();
        let uri_text = uri.to_string();
        let signable = SignableRequest::new(
            "POST",
            uri_text.as_str(),
            [("host", host.as_str()), ("content-type", content_type)].into_iter(),
            SignableBody::Bytes(body.as_bytes()),
        )
        .map_err(|e| format!("cannot sign the EC2 request: {e}"))?;
        let (instructions, _signature) = sign(signable, &params)
            .map_err(|e| format!("cannot sign the EC2 request: {}", error_chain(&e)))?
            .into_parts();
        instructions.apply_to_request_http1x(&mut request);
        Ok(request)
    }

    /// No idle connections are kept: the call is rare, and a pooled connection would tie
    /// the client to the runtime that opened it.
    fn plain_client(&self) -> &PlainClient {
        self.plain.get_or_init(|| {
            HyperClient::builder(TokioExecutor::new())
                .pool_max_idle_per_host(0)
                .build_http()
        })
    }

    fn https_client(&self) -> Result<&HttpsClient, String> {
        self.https
            .get_or_init(|| {
                let connector = hyper_rustls::HttpsConnectorBuilder::new()
                    .with_native_roots()
                    .map_err(|e| format!("cannot load the system's root certificates: {e}"))?
                    .https_only()
                    .enable_http1()
                    .build();
                Ok(HyperClient::builder(TokioExecutor::new())
                    .pool_max_idle_per_host(0)
                    .build(connector))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// The zone names of a `DescribeAvailabilityZones` answer (HTTP `status`, XML `body`):
/// the items of `availabilityZoneInfo` whose `zoneState` is `available` (and whose
/// `zoneType`, when given, is `availability-zone`: no Local or Wavelength Zones), sorted.
/// An EC2 error answer becomes `Code: Message`.
fn parse_describe_availability_zones(status: u16, body: &str) -> Result<Vec<String>, String> {
    let document = xml::children(body);
    if let Some((code, message)) = xml_error(&document) {
        return Err(match message {
            Some(message) => format!("{code}: {message}"),
            None => code,
        });
    }
    if !(200..300).contains(&status) {
        let mut text: String = body.trim().chars().take(300).collect();
        if text.is_empty() {
            text = "(empty body)".into();
        }
        return Err(format!("EC2 answered HTTP {status}: {text}"));
    }
    let info = document
        .iter()
        .find(|(name, _)| *name == "DescribeAvailabilityZonesResponse")
        .and_then(|(_, inner)| xml::child(inner, "availabilityZoneInfo"))
        .ok_or_else(|| {
            let start: String = body.trim().chars().take(300).collect();
            format!(
                "EC2 answered something other than a DescribeAvailabilityZonesResponse: {start}"
            )
        })?;
    let mut zones: Vec<String> = xml::children(info)
        .into_iter()
        .filter(|(name, _)| *name == "item")
        .filter_map(|(_, item)| {
            let name = xml::text(xml::child(item, "zoneName")?);
            let state = xml::child(item, "zoneState").map(xml::text);
            let kind = xml::child(item, "zoneType").map(xml::text);
            let usable = state.as_deref() == Some("available")
                && kind.as_deref().is_none_or(|k| k == "availability-zone");
            (usable && !name.is_empty()).then_some(name)
        })
        .collect();
    zones.sort();
    zones.dedup();
    Ok(zones)
}

/// A failed answer (HTTP `status`, `body`, described by `message`) as a provider error:
/// throttled or transient (so retried) by its EC2 error code or its status, else final.
fn answer_error(status: u16, body: &str, message: String) -> ProviderError {
    let code = xml_error(&xml::children(body)).map(|(code, _)| code);
    match ProviderError::classify(code.as_deref(), &message, Some(status)) {
        ProviderError::Throttled(..) => ProviderError::Throttled(message, None),
        ProviderError::Transient(_) => ProviderError::Transient(message),
        _ => ProviderError::Other(message),
    }
}

/// The code and message of an EC2 error document
/// (`<Response><Errors><Error><Code>…</Code><Message>…</Message></Error></Errors></Response>`).
fn xml_error(document: &[(&str, &str)]) -> Option<(String, Option<String>)> {
    let response = document
        .iter()
        .find(|(name, _)| *name == "Response" || *name == "ErrorResponse")?
        .1;
    let error = match xml::child(response, "Errors") {
        Some(errors) => xml::child(errors, "Error")?,
        None => xml::child(response, "Error")?,
    };
    let code = xml::text(xml::child(error, "Code")?);
    let message = xml::child(error, "Message")
        .map(xml::text)
        .filter(|m| !m.is_empty());
    Some((code, message))
}

/// Just enough XML reading for EC2 answers: elements, their children and their text.
mod xml {
    /// The top-level elements of `xml` as (name, inner text), in order. Declarations,
    /// comments and text between elements are skipped; a self-closing element has an empty
    /// inner text. Reading stops at the first malformed tag.
    pub(super) fn children(xml: &str) -> Vec<(&str, &str)> {
        let mut out = Vec::new();
        let mut depth = 0usize;
        let mut open: Option<(&str, usize)> = None;
        let mut at = 0;
        while let Some(offset) = xml[at..].find('<') {
            let lt = at + offset;
            let rest = &xml[lt..];
            let skip_to = |end: &str| rest.find(end).map(|i| lt + i + end.len());
            let next = if rest.starts_with("<?") {
                skip_to("?>")
            } else if rest.starts_with("<!--") {
                skip_to("-->")
            } else if rest.starts_with("<![CDATA[") {
                skip_to("]]>")
            } else if rest.starts_with("<!") {
                skip_to(">")
            } else {
                let Some(gt) = rest.find('>').map(|i| lt + i) else {
                    break;
                };
                let tag = &xml[lt + 1..gt];
                if let Some(closing) = tag.strip_prefix('/') {
                    let Some(d) = depth.checked_sub(1) else {
                        break;
                    };
                    depth = d;
                    if depth == 0
                        && let Some((name, start)) = open.take()
                    {
                        if name == closing.trim() {
                            out.push((name, &xml[start..lt]));
                        } else {
                            break;
                        }
                    }
                } else {
                    let self_closing = tag.ends_with('/');
                    let name = tag
                        .trim_end_matches('/')
                        .split(|c: char| c.is_ascii_whitespace())
                        .next()
                        .unwrap_or("");
                    if self_closing {
                        if depth == 0 {
                            out.push((name, ""));
                        }
                    } else {
                        if depth == 0 {
                            open = Some((name, gt + 1));
                        }
                        depth += 1;
                    }
                }
                Some(gt + 1)
            };
            match next {
                Some(n) => at = n,
                None => break,
            }
        }
        out
    }

    /// The inner text of the first top-level element of `xml` named `name`.
    pub(super) fn child<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
        children(xml)
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, inner)| inner)
    }

    /// The text of a leaf element: trimmed, with the XML entities replaced.
    pub(super) fn text(inner: &str) -> String {
        let inner = inner.trim();
        if let Some(cdata) = inner
            .strip_prefix("<![CDATA[")
            .and_then(|s| s.strip_suffix("]]>"))
        {
            return cdata.to_string();
        }
        let mut out = String::with_capacity(inner.len());
        let mut rest = inner;
        while let Some(amp) = rest.find('&') {
            out.push_str(&rest[..amp]);
            rest = &rest[amp..];
            let decoded = rest.find(';').and_then(|semi| {
                let entity = &rest[1..semi];
                let c = match entity {
                    "lt" => Some('<'),
                    "gt" => Some('>'),
                    "amp" => Some('&'),
                    "quot" => Some('"'),
                    "apos" => Some('\''),
                    _ => entity
                        .strip_prefix("#x")
                        .or_else(|| entity.strip_prefix("#X"))
                        .map(|hex| u32::from_str_radix(hex, 16))
                        .or_else(|| entity.strip_prefix('#').map(str::parse::<u32>))
                        .and_then(Result::ok)
                        .and_then(char::from_u32),
                };
                c.map(|c| (c, semi + 1))
            });
            match decoded {
                Some((c, len)) => {
                    out.push(c);
                    rest = &rest[len..];
                }
                None => {
                    out.push('&');
                    rest = &rest[1..];
                }
            }
        }
        out.push_str(rest);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZONES: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeAvailabilityZonesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>e3a5a1e4-0000-4a5b-9d1e-example</requestId>
    <availabilityZoneInfo>
        <item>
            <zoneName>us-east-1b</zoneName>
            <zoneState>available</zoneState>
            <regionName>us-east-1</regionName>
            <zoneId>use1-az2</zoneId>
            <zoneType>availability-zone</zoneType>
            <messageSet/>
        </item>
        <item>
            <zoneName>us-east-1a</zoneName>
            <zoneState>available</zoneState>
            <regionName>us-east-1</regionName>
            <messageSet>
                <item><message>a message in a nested item</message></item>
            </messageSet>
        </item>
        <item>
            <zoneName>us-east-1c</zoneName>
            <zoneState>impaired</zoneState>
        </item>
        <item>
            <zoneName>us-east-1-bos-1a</zoneName>
            <zoneState>available</zoneState>
            <zoneType>local-zone</zoneType>
        </item>
        <item>
            <zoneState>available</zoneState>
        </item>
    </availabilityZoneInfo>
</DescribeAvailabilityZonesResponse>"#;

    #[test]
    fn throttling_and_server_errors_are_retried_and_others_are_not() {
        let throttled = "<Response><Errors><Error><Code>RequestLimitExceeded</Code></Error></Errors></Response>";
        let cases = [
            (503, "Service Unavailable", true),
            (500, "", true),
            (400, throttled, true),
            (429, "slow down", true),
            (
                401,
                "<Response><Errors><Error><Code>AuthFailure</Code></Error></Errors></Response>",
                false,
            ),
            (200, "<Other/>", false),
        ];
        for (status, body, retried) in cases {
            let message = parse_describe_availability_zones(status, body).unwrap_err();
            let error = answer_error(status, body, message.clone());
            assert_eq!(error.is_retryable(), retried, "{status} {body}: {error:?}");
            assert_eq!(error.message(), message);
        }
    }

    #[test]
    fn zones_are_the_available_ones_sorted() {
        assert_eq!(
            parse_describe_availability_zones(200, ZONES).unwrap(),
            ["us-east-1a", "us-east-1b"]
        );
    }

    #[test]
    fn an_empty_zone_list_is_empty() {
        let body = "<DescribeAvailabilityZonesResponse><requestId>x</requestId>\
                    <availabilityZoneInfo/></DescribeAvailabilityZonesResponse>";
        assert_eq!(
            parse_describe_availability_zones(200, body).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_error_answer_gives_its_code_and_message() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>AuthFailure</Code><Message>AWS was not able to validate the provided access credentials &amp; &lt;more&gt;</Message></Error></Errors><RequestID>abc</RequestID></Response>"#;
        assert_eq!(
            parse_describe_availability_zones(401, body).unwrap_err(),
            "AuthFailure: AWS was not able to validate the provided access credentials & <more>"
        );
        // An error document wins even with a 200 status.
        assert_eq!(
            parse_describe_availability_zones(
                200,
                "<Response><Errors><Error><Code>Throttling</Code></Error></Errors></Response>"
            )
            .unwrap_err(),
            "Throttling"
        );
    }

    #[test]
    fn other_answers_are_errors_that_quote_them() {
        let err = parse_describe_availability_zones(503, "Service Unavailable").unwrap_err();
        assert_eq!(err, "EC2 answered HTTP 503: Service Unavailable");
        let err = parse_describe_availability_zones(200, "<Other/>").unwrap_err();
        assert!(err.contains("<Other/>"), "{err}");
        let err = parse_describe_availability_zones(500, "").unwrap_err();
        assert_eq!(err, "EC2 answered HTTP 500: (empty body)");
    }

    #[test]
    fn xml_children_and_text() {
        let xml = "<!-- c --><a x=\"1\">one<b>two</b></a><c/><d>&#65;&#x42;&bogus;&amp</d>";
        assert_eq!(
            xml::children(xml),
            [
                ("a", "one<b>two</b>"),
                ("c", ""),
                ("d", "&#65;&#x42;&bogus;&amp")
            ]
        );
        assert_eq!(xml::text("&#65;&#x42;&bogus;&amp"), "AB&bogus;&amp");
        assert_eq!(xml::text(" <![CDATA[<x>]]> "), "<x>");
        // Malformed input stops the reading instead of failing.
        assert_eq!(xml::children("<a><b></a>"), []);
        assert_eq!(xml::children("<a>"), []);
    }

    #[test]
    fn endpoints() {
        let config = SdkConfig::builder().build();
        let ec2 = Ec2::new(&config);
        assert_eq!(
            ec2.endpoint("eu-west-1"),
            "https://ec2.eu-west-1.amazonaws.com/"
        );
        assert_eq!(
            ec2.endpoint("cn-north-1"),
            "https://ec2.cn-north-1.amazonaws.com.cn/"
        );
        let config = SdkConfig::builder()
            .endpoint_url("http://127.0.0.1:4566/")
            .build();
        assert_eq!(
            Ec2::new(&config).endpoint("us-east-1"),
            "http://127.0.0.1:4566/"
        );
    }
}
