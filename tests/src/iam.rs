//! Reading IAM back: an inline policy of a role as its document text.

/// The document of inline policy `name` of `role`, as text (IAM answers it URL-encoded).
pub async fn role_policy_document(iam: &aws_sdk_iam::Client, role: &str, name: &str) -> String {
    let policy = iam
        .get_role_policy()
        .role_name(role)
        .policy_name(name)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "policy {name} of role {role}: {}",
                aws_sdk_iam::error::DisplayErrorContext(&e)
            )
        });
    percent_decoded(policy.policy_document())
}

/// `text` with its `%XX` escapes decoded.
pub fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_are_decoded_and_the_rest_kept() {
        assert_eq!(super::percent_decoded("a%20b%2Fc%zz%"), "a b/c%zz%");
    }
}
