//! The template language of `Fn::Sub`.

use crate::limits::abbreviate;

/// One piece of an `Fn::Sub` string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubPart {
    /// Text taken as it is (`${!Literal}` is already turned into `${Literal}`).
    Literal(String),
    /// A variable: a name from the variable map, a parameter, a pseudo parameter, a
    /// resource (`${Queue}`) or a resource attribute (`${Queue.Arn}`).
    Var(String),
}

/// Why an `Fn::Sub` string cannot be read (the string shown abbreviated).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubError {
    /// A `${` with no `}` after it.
    #[error("`${{` without a closing `}}` in Fn::Sub string `{0}`")]
    Unclosed(String),
    /// A `${}` with no name in it.
    #[error("empty `${{}}` in Fn::Sub string `{0}`")]
    Empty(String),
}

/// Splits an `Fn::Sub` string into literals and variables. `${!Name}` is the literal text
/// `${Name}`; a `$` not followed by `{` is literal. An unclosed `${` is an error.
pub fn parse_sub(text: &str) -> Result<Vec<SubPart>, SubError> {
    let shown = || abbreviate(text, 200).into_owned();
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        literal.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| SubError::Unclosed(shown()))?;
        let inner = &after[..end];
        if let Some(lit) = inner.strip_prefix('!') {
            literal.push_str("${");
            literal.push_str(lit);
            literal.push('}');
        } else {
            let name = inner.trim();
            if name.is_empty() {
                return Err(SubError::Empty(shown()));
            }
            if !literal.is_empty() {
                parts.push(SubPart::Literal(std::mem::take(&mut literal)));
            }
            parts.push(SubPart::Var(name.to_string()));
        }
        rest = &after[end + 1..];
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(SubPart::Literal(literal));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_literals_and_escapes() {
        assert_eq!(
            parse_sub("arn:${AWS::Partition}:s3:::${Bucket}/*").unwrap(),
            vec![
                SubPart::Literal("arn:".into()),
                SubPart::Var("AWS::Partition".into()),
                SubPart::Literal(":s3:::".into()),
                SubPart::Var("Bucket".into()),
                SubPart::Literal("/*".into()),
            ]
        );
        assert_eq!(
            parse_sub("${!Literal}-$x-${Res.Arn}").unwrap(),
            vec![
                SubPart::Literal("${Literal}-$x-".into()),
                SubPart::Var("Res.Arn".into())
            ]
        );
        assert_eq!(parse_sub("").unwrap(), vec![]);
        assert!(parse_sub("a ${b").is_err());
        assert!(parse_sub("${}").is_err());
    }
}
