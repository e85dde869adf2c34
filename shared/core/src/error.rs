//! The one error type of the template core.
//!
//! Every error names where it happened: the file (when there is one), the path inside the
//! template (`Resources.Queue.Properties.VisibilityTimeout`) and what is wrong, with a hint
//! at the fix where one is known.

use std::fmt;

use crate::limits::{MAX_MESSAGE_CHARS, abbreviate};

/// What kind of problem a [`TemplateError`] reports. Tests and callers match on it; people
/// read the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// The text is not valid JSON or YAML.
    Syntax,
    /// A section, key or value has the wrong shape (a list where an object is expected, an
    /// unknown top-level section, a resource without `Type`, ...).
    Structure,
    /// A `Ref`, `Fn::GetAtt`, `Fn::Sub` variable, `DependsOn` or condition name that names
    /// nothing in the template.
    UnresolvedReference,
    /// A parameter value that breaks the parameter's constraints, or a parameter given on
    /// the command line that the template does not declare.
    ParameterValue,
    /// A parameter without a value and without a `Default`.
    MissingParameter,
    /// A `Transform` stackflow does not run (SAM, `AWS::LanguageExtensions`, macros).
    UnsupportedTransform,
    /// An intrinsic function stackflow does not implement (`Fn::ToJsonString`, ...).
    UnsupportedFunction,
    /// An intrinsic function used with the wrong arguments, or that fails (`Fn::Select`
    /// out of range, a bad CIDR block, a missing mapping key, ...).
    InvalidFunction,
    /// A value that only exists once a resource is deployed, needed where it is not known.
    NotAvailable,
    /// Resources that depend on each other in a circle.
    Cycle,
    /// A dynamic reference (`{{resolve:...}}`) that is malformed or cannot be looked up.
    DynamicReference,
    /// A cloud assembly (`cdk.out`) that cannot be read.
    Assembly,
    /// Reading a file failed.
    Io,
    /// The template, or a value computed from it, goes past one of the limits that keep
    /// bad input from exhausting memory, time or the stack (see [`crate::limits`]): its
    /// size, how deep it nests, the length of a computed string.
    Limit,
}

/// An error in a template, with where it is and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// What kind of problem it is.
    pub kind: ErrorKind,
    /// The template file, when the template came from one.
    pub file: Option<String>,
    /// The path inside the template, dotted, list indexes in brackets:
    /// `Resources.Queue.Properties.Tags[0].Key`. Empty for the whole template.
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when that is known.
    pub hint: Option<String>,
    /// The other problems of the same template found beside this one, each with its own
    /// path (see [`TemplateError::all`]).
    pub also: Box<[TemplateError]>,
}

impl TemplateError {
    /// A new error at `path`. A path or message longer than
    /// [`MAX_MESSAGE_CHARS`] (a long value quoted from the template) is shortened in the
    /// middle.
    pub fn new(kind: ErrorKind, path: impl fmt::Display, message: impl Into<String>) -> Self {
        TemplateError {
            kind,
            file: None,
            path: bounded(path.to_string()),
            message: bounded(message.into()),
            hint: None,
            also: Box::default(),
        }
    }

    /// Adds a hint at the fix.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(bounded(hint.into()));
        self
    }

    /// Names the file the template came from (kept when already set).
    #[must_use]
    /// The problems of one template as one error: `None` for none, else the first one,
    /// carrying the others in [`TemplateError::also`] (its display lists them all).
    pub fn all(problems: Vec<TemplateError>) -> Option<TemplateError> {
        let mut problems = problems.into_iter();
        let first = problems.next()?;
        Some(first.with_more(problems))
    }

    /// This error, carrying `more` problems of the same template after those it has.
    pub fn with_more(mut self, more: impl IntoIterator<Item = TemplateError>) -> Self {
        let mut also = std::mem::take(&mut self.also).into_vec();
        also.extend(more);
        self.also = also.into();
        self
    }

    pub fn in_file(mut self, file: impl fmt::Display) -> Self {
        if self.file.is_none() {
            self.file = Some(file.to_string());
        }
        self
    }
}

/// At most this many problems of a template are listed in one error ([`TemplateError::all`]).
pub const MAX_LISTED: usize = 20;

/// `text`, shortened in the middle when it is longer than [`MAX_MESSAGE_CHARS`].
fn bounded(text: String) -> String {
    if text.len() <= MAX_MESSAGE_CHARS {
        return text;
    }
    abbreviate(&text, MAX_MESSAGE_CHARS).into_owned()
}

impl TemplateError {
    /// Its path, message and hint (not its file, nor the other problems).
    fn one(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}: ")?;
        }
        if self.also.is_empty() {
            return self.one(f);
        }
        let count = 1 + self.also.len();
        write!(f, "{count} problems:")?;
        for problem in std::iter::once(self)
            .chain(self.also.iter())
            .take(MAX_LISTED)
        {
            f.write_str("\n  - ")?;
            problem.one(f)?;
        }
        if count > MAX_LISTED {
            write!(f, "\n  - and {} more", count - MAX_LISTED)?;
        }
        Ok(())
    }
}

impl std::error::Error for TemplateError {}

/// The result type of the template core.
pub type Result<T, E = TemplateError> = std::result::Result<T, E>;

/// A path inside a template, built up while walking it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Path {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Segment {
    Key(String),
    Index(usize),
}

impl Path {
    /// The root of the template.
    pub fn root() -> Self {
        Path::default()
    }

    /// A path from dotted keys: `Path::from_keys(["Resources", "Queue"])`.
    pub fn from_keys<I, S>(keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Path {
            segments: keys.into_iter().map(|k| Segment::Key(k.into())).collect(),
        }
    }

    /// This path extended by an object key.
    #[must_use]
    pub fn key(&self, key: &str) -> Self {
        let mut p = self.clone();
        p.segments.push(Segment::Key(key.to_string()));
        p
    }

    /// This path extended by a list index.
    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        let mut p = self.clone();
        p.segments.push(Segment::Index(index));
        p
    }

    /// The segments as strings, list indexes in decimal (the shape the resource schemas'
    /// property paths use), skipping the first `skip` segments.
    pub fn segments_from(&self, skip: usize) -> Vec<String> {
        self.segments
            .iter()
            .skip(skip)
            .map(|s| match s {
                Segment::Key(k) => k.clone(),
                Segment::Index(i) => i.to_string(),
            })
            .collect()
    }

    /// How many segments the path has.
    pub fn len(&self) -> usize {
        self.segments.len()
    }

    /// True for the root.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segments.iter().enumerate() {
            match s {
                Segment::Key(k) if i == 0 => f.write_str(k)?,
                Segment::Key(k) => write!(f, ".{k}")?,
                Segment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// The one of `candidates` closest to `name`, when one is close enough to be what was
/// meant (a typo: at most a third of its letters differ, one at least), for a "did you
/// mean" in a message.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

/// ` (did you mean `X`?)` for a message, when something close was found; else nothing.
pub fn did_you_mean(candidate: Option<impl fmt::Display>) -> String {
    candidate
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

/// The edit distance of `a` and `b` (insertions, deletions, substitutions; ASCII case
/// counts as a difference).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut last = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(last + usize::from(ca != *cb));
            last = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_what_was_meant_and_nothing_far_is_offered() {
        let names = ["Queue", "Topic", "QueuePolicy", "Env"];
        assert_eq!(closest("Queu", names), Some("Queue"));
        assert_eq!(closest("Topik", names), Some("Topic"));
        assert_eq!(closest("queue", names), Some("Queue"));
        assert_eq!(closest("Bucket", names), None);
        assert_eq!(closest("Ev", names), Some("Env"));
        assert_eq!(closest("X", names), None);
    }

    #[test]
    fn path_display_uses_dots_and_brackets() {
        let p = Path::root()
            .key("Resources")
            .key("Queue")
            .key("Properties")
            .key("Tags")
            .index(0)
            .key("Key");
        assert_eq!(p.to_string(), "Resources.Queue.Properties.Tags[0].Key");
        assert_eq!(p.segments_from(3), vec!["Tags", "0", "Key"]);
    }

    #[test]
    fn long_messages_and_paths_are_shortened() {
        let long = "x".repeat(100_000);
        let e = TemplateError::new(ErrorKind::Structure, Path::root().key(&long), long.clone())
            .with_hint(long.clone());
        for s in [&e.path, &e.message, e.hint.as_ref().unwrap()] {
            assert!(s.chars().count() <= MAX_MESSAGE_CHARS + 3, "{}", s.len());
            assert!(s.contains(" … "));
        }
    }

    #[test]
    fn error_display_names_file_path_and_hint() {
        let e = TemplateError::new(ErrorKind::UnresolvedReference, "Resources.A", "Ref to B")
            .with_hint("declare B")
            .in_file("t.yaml");
        assert_eq!(
            e.to_string(),
            "t.yaml: Resources.A: Ref to B (hint: declare B)"
        );
    }
}
