//! Builds the JSON value of a template straight from the JSON or YAML parser, YAML
//! short-form tags turned into the long form, within the limits of [`crate::limits`]: how
//! deep it nests and how much it holds once YAML aliases are expanded. Going past one
//! stops the parser at once, with the path where it happened.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{self, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{ErrorKind, Path, TemplateError};
use crate::limits::{MAX_DEPTH, MAX_EXPANDED_SIZE, show_bytes};

/// What one parse shares between the levels of the value: the size so far and the error
/// that stopped it, if it was one of ours.
#[derive(Debug)]
pub(super) struct Reader {
    yaml: bool,
    size: Cell<usize>,
    error: RefCell<Option<Stopped>>,
}

/// An error of ours and the path where it happened, innermost segment first (each level
/// adds its own segment as the error goes up).
#[derive(Debug)]
struct Stopped {
    kind: ErrorKind,
    message: String,
    segments: Vec<Segment>,
}

#[derive(Debug)]
enum Segment {
    Key(String),
    Index(usize),
}

impl Reader {
    pub(super) fn new(yaml: bool) -> Reader {
        Reader {
            yaml,
            size: Cell::new(0),
            error: RefCell::new(None),
        }
    }

    /// The value's root.
    pub(super) fn root(&self) -> Node<'_> {
        Node {
            reader: self,
            depth: 0,
        }
    }

    /// The error of ours that stopped the parse, with its path, if it was one.
    pub(super) fn take_error(&self) -> Option<TemplateError> {
        let stopped = self.error.borrow_mut().take()?;
        let mut path = Path::root();
        for s in stopped.segments.into_iter().rev() {
            path = match s {
                Segment::Key(k) => path.key(&k),
                Segment::Index(i) => path.index(i),
            };
        }
        Some(TemplateError::new(stopped.kind, path, stopped.message))
    }

    /// Records an error of ours (the first one wins) and gives the parser's error that
    /// stops it.
    fn fail<E: de::Error>(&self, kind: ErrorKind, message: String) -> E {
        let mut slot = self.error.borrow_mut();
        if slot.is_none() {
            *slot = Some(Stopped {
                kind,
                message: message.clone(),
                segments: vec![],
            });
        }
        E::custom(message)
    }

    /// Adds a segment to the path of the error of ours going up, if there is one.
    fn at(&self, segment: Segment) {
        if let Some(s) = self.error.borrow_mut().as_mut() {
            s.segments.push(segment);
        }
    }

    fn charge<E: de::Error>(&self, units: usize) -> Result<(), E> {
        let size = self.size.get().saturating_add(units);
        self.size.set(size);
        if size > MAX_EXPANDED_SIZE {
            return Err(self.fail(
                ErrorKind::Limit,
                format!(
                    "the template holds more than {} once its YAML aliases are expanded",
                    show_bytes(MAX_EXPANDED_SIZE)
                ),
            ));
        }
        Ok(())
    }
}

/// One value of the template, `depth` lists and objects deep.
#[derive(Clone, Copy)]
pub(super) struct Node<'r> {
    reader: &'r Reader,
    depth: usize,
}

impl<'r> Node<'r> {
    /// The node of this list's or object's elements; an error past [`MAX_DEPTH`].
    fn enter<E: de::Error>(self) -> Result<Node<'r>, E> {
        if self.depth >= MAX_DEPTH {
            return Err(self.reader.fail(
                ErrorKind::Limit,
                format!("the template nests lists and objects more than {MAX_DEPTH} levels deep"),
            ));
        }
        self.reader.charge(1)?;
        Ok(Node {
            reader: self.reader,
            depth: self.depth + 1,
        })
    }

    fn string<E: de::Error>(self, s: String) -> Result<Value, E> {
        self.reader.charge(s.len().max(1))?;
        Ok(Value::String(s))
    }

    /// A tagged YAML node (`!Ref X`) as its long form (`{"Ref": "X"}`).
    fn tagged<'de, A: VariantAccess<'de>>(self, tag: &str, content: A) -> Result<Value, A::Error> {
        let name = tag.trim_start_matches('!');
        // A non-specific tag (`! "Ref"`) leaves the node as it is.
        if name.is_empty() {
            return content.newtype_variant_seed(self);
        }
        let key = long_form(name);
        let inner = self.enter()?;
        let arg = content.newtype_variant_seed(inner).inspect_err(|_| {
            self.reader.at(Segment::Key(key.clone()));
        })?;
        let arg = match arg {
            // `!GetAtt Resource.Attribute`: split at the first dot; attribute names such
            // as `Outputs.Name` or `Endpoint.Address` keep their own dots.
            Value::String(s) if name == "GetAtt" && s.contains('.') => {
                inner.enter().inspect_err(|_| {
                    self.reader.at(Segment::Key(key.clone()));
                })?;
                let (res, attr) = s.split_once('.').unwrap_or((&s, ""));
                Value::Array(vec![res.into(), attr.into()])
            }
            other => other,
        };
        let mut out = Map::new();
        out.insert(key, arg);
        Ok(Value::Object(out))
    }
}

/// The long-form function name for a YAML short-form tag (`!Sub` is `Fn::Sub`, `!Ref` is
/// `Ref`, `!Condition` is `Condition`).
fn long_form(tag: &str) -> String {
    match tag {
        "Ref" | "Condition" => tag.to_string(),
        other => format!("Fn::{other}"),
    }
}

/// A float as JSON: `.inf` and `.nan` have no JSON number and keep their YAML spelling.
fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .unwrap_or_else(|| Value::String(yaml_serde::Number::from(f).to_string()))
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON or YAML value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Value::from(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Value::from(n))
    }

    /// Integers past 64 bits keep their digits, as CloudFormation reads scalars as text.
    fn visit_i128<E: de::Error>(self, n: i128) -> Result<Value, E> {
        self.string(n.to_string())
    }

    fn visit_u128<E: de::Error>(self, n: u128) -> Result<Value, E> {
        self.string(n.to_string())
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(float(f))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        self.string(s.to_string())
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
        self.string(s)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.reader.charge(1)?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.enter()?;
        let mut out = Vec::new();
        loop {
            match seq.next_element_seed(inner) {
                Ok(Some(v)) => out.push(v),
                Ok(None) => return Ok(Value::Array(out)),
                Err(e) => {
                    self.reader.at(Segment::Index(out.len()));
                    return Err(e);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.enter()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(Key(self.reader))? {
            if self.reader.yaml && out.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate entry with key {key:?}"
                )));
            }
            match map.next_value_seed(inner) {
                Ok(v) => {
                    out.insert(key, v);
                }
                Err(e) => {
                    self.reader.at(Segment::Key(key));
                    return Err(e);
                }
            }
        }
        Ok(Value::Object(out))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        let (tag, content): (String, _) = data.variant()?;
        self.tagged(&tag, content)
    }
}

/// A mapping key: a plain scalar, as text.
#[derive(Clone, Copy)]
struct Key<'r>(&'r Reader);

impl Key<'_> {
    fn text<E: de::Error>(self, s: String) -> Result<String, E> {
        self.0.charge(s.len().max(1))?;
        Ok(s)
    }

    fn not_scalar<E: de::Error>(self, what: &str) -> E {
        self.0.fail(
            ErrorKind::Structure,
            format!("a mapping key must be a plain scalar, found {what}"),
        )
    }
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = String;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<String, E> {
        self.text(b.to_string())
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<String, E> {
        self.text(n.to_string())
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<String, E> {
        self.text(n.to_string())
    }

    fn visit_i128<E: de::Error>(self, n: i128) -> Result<String, E> {
        self.text(n.to_string())
    }

    fn visit_u128<E: de::Error>(self, n: u128) -> Result<String, E> {
        self.text(n.to_string())
    }

    fn visit_f64<E: de::Error>(self, f: f64) -> Result<String, E> {
        self.text(yaml_serde::Number::from(f).to_string())
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<String, E> {
        self.text(s.to_string())
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<String, E> {
        self.text(s)
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        self.text("null".to_string())
    }

    fn visit_none<E: de::Error>(self) -> Result<String, E> {
        self.visit_unit()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        Err(self.not_scalar("a list"))
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        Err(self.not_scalar("an object"))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<String, A::Error> {
        let (tag, content): (String, _) = data.variant()?;
        // A non-specific tag (`! "Ref"`) leaves the scalar as it is.
        if tag.trim_start_matches('!').is_empty() {
            return content.newtype_variant_seed(self);
        }
        Err(self.not_scalar(&format!(
            "a value tagged `!{}`",
            tag.trim_start_matches('!')
        )))
    }
}
