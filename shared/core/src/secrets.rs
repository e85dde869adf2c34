//! What is recorded in place of a secret, and where secrets are.
//!
//! A value computed from a secret is *tainted*: a `Ref` to a `NoEcho` parameter, a
//! `Fn::GetAtt` of an attribute that was recorded masked, and every function whose
//! arguments hold one of those (`Fn::Join`, `Fn::Sub`, `Fn::Base64`, `Fn::Select` of a
//! `Fn::Split`, `Fn::If`, ...). Taint is decided from the template expression, not by
//! looking for the secret's text in the result: `Fn::Base64` of a password holds no
//! substring of it, and is masked all the same, whole.
//!
//! A masked value is recorded as a [`MASK`] followed by a keyed digest of the value
//! (`****#3f9a1c2b7d4e8a60`) when a [`DigestKey`] is given: two deploys of the same
//! value record the same text, and a rotated secret records another, so the plan sees
//! the change without the value being written down. The key is kept out of the log.

use std::collections::HashSet;
use std::fmt;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::dynref::resolve::push_token;
use crate::intrinsics::{BoundParameters, contains_unknown};
pub use crate::mask::{MASK, contains_mask, is_mask, is_masked, mask_values};

/// The key of the digests recorded in place of secret values (HMAC-SHA-256). `Debug`
/// never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct DigestKey([u8; 32]);

impl fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DigestKey(<redacted>)")
    }
}

const BLOCK: usize = 64;

/// HMAC-SHA-256 (RFC 2104) of `message` under `key`.
fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

impl DigestKey {
    /// A key from its bytes.
    pub fn new(bytes: [u8; 32]) -> DigestKey {
        DigestKey(bytes)
    }

    /// A key from its hex text (64 digits), as it is stored.
    pub fn from_hex(text: &str) -> Option<DigestKey> {
        let text = text.trim();
        if text.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(DigestKey(out))
    }

    /// The key as hex text, to store it.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// The key of one stack: derived, so that digests of one stack say nothing about
    /// another's.
    pub fn for_stack(&self, stack: &str) -> DigestKey {
        DigestKey(hmac(&self.0, format!("stackflow stack {stack}").as_bytes()))
    }

    /// What is recorded in place of `value`: the mask and 64 bits of its digest.
    pub fn token(&self, value: &str) -> String {
        let mac = hmac(&self.0, value.as_bytes());
        format!("{MASK}#{}", hex(&mac[..8]))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where secrets come from in one stack, and how they are recorded.
pub struct Masking<'a> {
    parameters: &'a BoundParameters,
    key: Option<&'a DigestKey>,
    sensitive: &'a dyn Fn(&str, &str) -> bool,
}

impl fmt::Debug for Masking<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Masking").finish_non_exhaustive()
    }
}

/// No attribute is sensitive.
pub fn no_sensitive_attributes(_: &str, _: &str) -> bool {
    false
}

impl<'a> Masking<'a> {
    /// Secrets are the `NoEcho` values of `parameters` and the attributes `sensitive`
    /// names (`(resource, attribute)`); masked values carry digests under `key`.
    pub fn new(
        parameters: &'a BoundParameters,
        key: Option<&'a DigestKey>,
        sensitive: &'a dyn Fn(&str, &str) -> bool,
    ) -> Masking<'a> {
        Masking {
            parameters,
            key,
            sensitive,
        }
    }

    /// What is recorded in place of the string `s` (a mask stays as it is).
    pub fn token(&self, s: &str) -> String {
        if is_mask(s) {
            return s.to_string();
        }
        match self.key {
            Some(k) => k.token(s),
            None => MASK.to_string(),
        }
    }

    /// True when the template expression `expr` computes its value from a secret.
    pub fn tainted(&self, expr: &Value) -> bool {
        match expr {
            Value::Object(m) if m.len() == 1 => {
                let (k, arg) = m.iter().next().expect("one entry");
                match (k.as_str(), arg) {
                    ("Ref", Value::String(name)) => self.parameters.is_no_echo(name),
                    ("Fn::GetAtt", arg) => self.get_att_tainted(arg),
                    ("Fn::Sub", Value::String(text)) => self.sub_tainted(text, &Map::new()),
                    ("Fn::Sub", Value::Array(items)) if !items.is_empty() => {
                        let vars = items.get(1).and_then(Value::as_object);
                        let own = vars.cloned().unwrap_or_default();
                        own.values().any(|v| self.tainted(v))
                            || items[0].as_str().is_some_and(|t| self.sub_tainted(t, &own))
                            || self.tainted(&items[0])
                    }
                    _ => self.tainted(arg),
                }
            }
            Value::Object(m) => m.values().any(|v| self.tainted(v)),
            Value::Array(items) => items.iter().any(|v| self.tainted(v)),
            _ => false,
        }
    }

    fn get_att_tainted(&self, arg: &Value) -> bool {
        let (res, attr) = match arg {
            Value::String(s) => match s.split_once('.') {
                Some((r, a)) => (r.to_string(), a.to_string()),
                None => return false,
            },
            Value::Array(items) => match (items.first(), items.get(1)) {
                (Some(Value::String(r)), Some(Value::String(a))) => (r.clone(), a.clone()),
                (_, Some(other)) => return self.tainted(other),
                _ => return false,
            },
            _ => return false,
        };
        (self.sensitive)(&res, &attr)
    }

    /// True when a `Fn::Sub` string names a secret (`${Param}`, `${Res.Attr}`) that its
    /// own variables (`own`) do not define.
    fn sub_tainted(&self, text: &str, own: &Map<String, Value>) -> bool {
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else { break };
            let name = after[..end].trim();
            rest = &after[end + 1..];
            if name.starts_with('!') || own.contains_key(name) {
                continue;
            }
            let secret = match name.split_once('.') {
                Some((r, a)) => (self.sensitive)(r, a),
                None => self.parameters.is_no_echo(name),
            };
            if secret {
                return true;
            }
        }
        false
    }

    /// The JSON pointers (RFC 6901) of the values in `resolved` that the template
    /// expressions in `template` computed from a secret. A list whose length changed
    /// (`AWS::NoValue` removed an element) and that holds a tainted element is tainted
    /// whole.
    pub fn tainted_pointers(&self, template: &Value, resolved: &Value) -> Vec<String> {
        let mut out = Vec::new();
        self.walk(template, resolved, &mut String::new(), &mut out);
        out
    }

    fn walk(&self, template: &Value, resolved: &Value, at: &mut String, out: &mut Vec<String>) {
        let function = matches!(template, Value::Object(m)
            if m.len() == 1 && m.keys().all(|k| k == "Ref" || k.starts_with("Fn::")));
        if function {
            if self.tainted(template) {
                out.push(at.clone());
            }
            return;
        }
        match (template, resolved) {
            (Value::Object(t), Value::Object(r)) => {
                for (k, tv) in t {
                    if let Some(rv) = r.get(k) {
                        let len = at.len();
                        push_token(at, k);
                        self.walk(tv, rv, at, out);
                        at.truncate(len);
                    }
                }
            }
            (Value::Array(t), Value::Array(r)) if t.len() == r.len() => {
                for (i, (tv, rv)) in t.iter().zip(r).enumerate() {
                    let len = at.len();
                    push_token(at, &i.to_string());
                    self.walk(tv, rv, at, out);
                    at.truncate(len);
                }
            }
            (Value::Array(t), Value::Array(_)) if t.iter().any(|v| self.tainted(v)) => {
                out.push(at.clone());
            }
            _ => {}
        }
    }

    /// `resolved` as it is recorded: every tainted value (see [`Self::tainted_pointers`])
    /// replaced whole by its [`Self::token`], and the `NoEcho` values masked wherever
    /// else they appear.
    pub fn mask(&self, template: &Value, resolved: &Value) -> Value {
        let mut out = resolved.clone();
        for p in self.tainted_pointers(template, resolved) {
            if let Some(v) = out.pointer_mut(&p) {
                *v = self.mask_whole(v);
            }
        }
        self.mask_substrings(&out)
    }

    /// A resource's properties as they are recorded (see [`Self::mask`]).
    pub fn mask_properties(
        &self,
        template: &Map<String, Value>,
        resolved: &Map<String, Value>,
    ) -> Map<String, Value> {
        match self.mask(
            &Value::Object(template.clone()),
            &Value::Object(resolved.clone()),
        ) {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    /// Every string in `v` replaced by its token (a *known after deploy* marker stays).
    pub fn mask_whole(&self, v: &Value) -> Value {
        if contains_unknown(v) {
            return v.clone();
        }
        match v {
            Value::String(s) => Value::String(self.token(s)),
            Value::Number(n) => Value::String(self.token(&n.to_string())),
            Value::Array(items) => Value::Array(items.iter().map(|i| self.mask_whole(i)).collect()),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), self.mask_whole(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// `v` with every `NoEcho` value replaced by [`MASK`] inside its strings.
    pub fn mask_substrings(&self, v: &Value) -> Value {
        mask_values(v, &self.parameters.secret_values())
    }

    /// `v` with every string that holds one of `needles` (in any of its [`forms`])
    /// replaced whole by its token: what a provider reports (attributes) after a call
    /// that was sent secrets. Needles shorter than 4 characters must match a whole
    /// string, so that a short secret does not mask every value that happens to hold it.
    pub fn mask_containing(&self, v: &Value, needles: &[String]) -> Value {
        let forms: Vec<String> = needles.iter().flat_map(|n| forms(n)).collect();
        self.mask_containing_forms(v, &forms)
    }

    fn mask_containing_forms(&self, v: &Value, forms: &[String]) -> Value {
        match v {
            Value::String(s) if !is_mask(s) && holds_any(s, forms) => Value::String(self.token(s)),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|i| self.mask_containing_forms(i, forms))
                    .collect(),
            ),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), self.mask_containing_forms(v, forms)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// The strings of `resolved` at the tainted positions: the derived values to mask in
    /// messages, with the `NoEcho` values themselves.
    pub fn tainted_values(&self, template: &Value, resolved: &Value) -> Vec<String> {
        let mut out = self.parameters.secret_values();
        for p in self.tainted_pointers(template, resolved) {
            if let Some(v) = resolved.pointer(&p) {
                strings(v, &mut out);
            }
        }
        out.retain(|s| !s.is_empty() && !is_mask(s));
        out.sort();
        out.dedup();
        out
    }
}

/// True when `s` holds one of `forms` (a form shorter than 4 characters only as all of
/// `s`).
fn holds_any(s: &str, forms: &[String]) -> bool {
    forms
        .iter()
        .any(|f| !f.is_empty() && (s == f || (f.chars().count() >= 4 && s.contains(f.as_str()))))
}

/// Every string (and number, as text) in `v`.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Object(m) => m.values().for_each(|i| strings(i, out)),
        _ => {}
    }
}

/// The forms a secret can take in text: as it is, JSON-escaped (inside serialized
/// JSON), and base64 (standard alphabet). Empty values have none.
pub fn forms(secret: &str) -> Vec<String> {
    use base64::Engine as _;
    if secret.is_empty() {
        return Vec::new();
    }
    let mut out = vec![secret.to_string()];
    if let Ok(json) = serde_json::to_string(secret)
        && let Some(inner) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"'))
        && inner != secret
    {
        out.push(inner.to_string());
    }
    out.push(base64::engine::general_purpose::STANDARD.encode(secret));
    out
}

/// The names of sensitive attributes in recorded attributes: those recorded masked.
pub fn masked_attributes<'v>(
    attributes: impl IntoIterator<Item = (&'v String, &'v Value)>,
) -> HashSet<String> {
    attributes
        .into_iter()
        .filter(|(_, v)| contains_mask(v))
        .map(|(k, _)| k.clone())
        .collect()
}

#[cfg(test)]
mod tests;
