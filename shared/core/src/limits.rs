//! The limits that keep bad input from exhausting memory, time or the stack.
//!
//! A template is input: written by hand, generated, or handed over by someone else. Each
//! way it could make stackflow allocate without bound, run for ever or recurse until the
//! stack overflows has a limit here, and going past one is an [`ErrorKind::Limit`] error
//! that names where in the template it happened.
//!
//! The values leave room above what real templates need: the deepest template of the
//! CDK corpus and of cfn-lint's good templates nests 14 levels (5 of them intrinsic
//! functions), and CloudFormation itself takes templates of at most 1 MB.
//!
//! [`ErrorKind::Limit`]: crate::ErrorKind::Limit

use std::borrow::Cow;

/// The largest template text, in bytes: four times CloudFormation's 1 MB, so every
/// template CloudFormation takes is taken, while the parsed form stays in the tens of
/// megabytes.
pub const MAX_TEMPLATE_BYTES: usize = 4 * 1024 * 1024;

/// How deep lists and objects may nest in a template, counted from the template's top
/// object (`Resources` is at depth 1, `Resources.Queue.Properties` at 3). The deepest
/// template seen nests 14 levels; JSON and YAML parsers stop at 128, and a value resolved
/// from a template (a mapping's value placed deep inside a property) must stay well
/// inside that to be read back from the event log.
pub const MAX_DEPTH: usize = 64;

/// What a parsed template may hold once YAML aliases (`*name`) are expanded: one unit per
/// list, object, number, boolean and null, one per byte of a string. Text without
/// aliases never gets near it (each unit takes at least one byte of text); a "billion
/// laughs" document stops here instead of filling the memory.
pub const MAX_EXPANDED_SIZE: usize = 2 * MAX_TEMPLATE_BYTES;

/// The longest string an intrinsic function may compute (`Fn::Join`, `Fn::Sub`,
/// `Fn::Base64`), in bytes: CloudFormation's whole template limit, 1 MB.
pub const MAX_STRING_BYTES: usize = 1024 * 1024;

/// How much the intrinsic functions of one plan (or of one resolver) may compute in
/// all, in bytes of their results: a template that refers to a large mapping value, a
/// long parameter default or a long computed string from thousands of places stops here
/// instead of multiplying its size.
pub const MAX_RESOLVED_BYTES: usize = 64 * 1024 * 1024;

/// How deep nested stacks may nest in a cloud assembly (a template that includes itself
/// is a circle, reported as such).
pub const MAX_NESTED_STACK_DEPTH: usize = 16;

/// How many nested stack templates one stack may load in all.
pub const MAX_NESTED_STACKS: usize = 500;

/// The longest message or path an error shows, in characters: a long value quoted in a
/// message is shortened in the middle.
pub const MAX_MESSAGE_CHARS: usize = 1000;

/// `text` shortened to at most `max` characters (plus an ellipsis): its beginning and
/// its end, with ` … ` in between.
pub fn abbreviate(text: &str, max: usize) -> Cow<'_, str> {
    let count = text.chars().count();
    if count <= max {
        return Cow::Borrowed(text);
    }
    let head: String = text.chars().take(max / 2).collect();
    let tail: String = text.chars().skip(count - (max - max / 2)).collect();
    Cow::Owned(format!("{head} … {tail}"))
}

/// A size in bytes as messages show it (`1 MiB`, `64 MiB`, `4096 bytes`).
pub fn show_bytes(n: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else {
        format!("{n} bytes")
    }
}

/// The text of a file, or `None` when it is longer than [`MAX_TEMPLATE_BYTES`] (only that
/// much is read).
pub(crate) fn read_bounded(file: &std::path::Path) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(file)?
        .take(MAX_TEMPLATE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_TEMPLATE_BYTES {
        return Ok(None);
    }
    String::from_utf8(bytes).map(Some).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviate_keeps_both_ends() {
        assert_eq!(abbreviate("short", 10), "short");
        let long = "a".repeat(10) + &"b".repeat(10);
        assert_eq!(abbreviate(&long, 6), "aaa … bbb");
        let s = "é".repeat(30);
        assert_eq!(abbreviate(&s, 4).chars().filter(|c| *c == 'é').count(), 4);
    }

    #[test]
    fn sizes_show_in_mib_when_round() {
        assert_eq!(show_bytes(MAX_STRING_BYTES), "1 MiB");
        assert_eq!(show_bytes(MAX_TEMPLATE_BYTES), "4 MiB");
        assert_eq!(show_bytes(1000), "1000 bytes");
    }
}
