//! Masking: hiding the secret values a [`Resolution`] substituted.

use super::{MASK, Resolution};

impl Resolution {
    /// Replaces every secret value (longest first, non-empty only) in `text` with `***`
    /// (for error messages and logs). The JSON-escaped form of each secret (as it appears
    /// inside serialized JSON, e.g. with `\"` for `"`) is masked too.
    pub fn mask(&self, text: &str) -> String {
        let mut needles: Vec<String> = Vec::new();
        for secret in self.records.iter().flat_map(|r| &r.secrets) {
            if secret.is_empty() {
                continue;
            }
            needles.push(secret.clone());
            if let Ok(json) = serde_json::to_string(secret)
                && let Some(inner) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"'))
                && inner != secret
            {
                needles.push(inner.to_owned());
            }
        }
        if needles.is_empty() {
            return text.to_owned();
        }
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        needles.dedup();

        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if let Some(needle) = needles.iter().find(|n| rest.starts_with(n.as_str())) {
                out.push_str(MASK);
                rest = &rest[needle.len()..];
            } else {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::dynref::testing::map_lookup;
    use crate::dynref::{Resolution, resolve};

    #[test]
    fn mask_hides_secrets() {
        let lookup = map_lookup(&[
            ("{{resolve:secretsmanager:A}}", "pass"),
            ("{{resolve:secretsmanager:B}}", "password123"),
            ("{{resolve:ssm-secure:q}}", "say \"hi\""),
            ("{{resolve:secretsmanager:E}}", ""),
        ]);
        let input = json!({
            "A": "{{resolve:secretsmanager:A}}",
            "B": "{{resolve:secretsmanager:B}}",
            "Q": "{{resolve:ssm-secure:q}}",
            "E": "{{resolve:secretsmanager:E}}",
        });
        let (out, res) = resolve(&input, &lookup).unwrap();
        // Empty values are not recorded.
        assert!(res.records[3].secrets.is_empty());
        let error = format!(
            "CreateDBInstance failed: invalid MasterUserPassword password123 (also pass); props {out}"
        );
        let masked = res.mask(&error);
        assert_eq!(
            masked,
            "CreateDBInstance failed: invalid MasterUserPassword *** (also ***); props \
             {\"A\":\"***\",\"B\":\"***\",\"Q\":\"***\",\"E\":\"\"}"
        );
        assert!(!masked.contains("pass"));
        assert!(!masked.contains("hi"));
        assert_eq!(res.mask("say \"hi\"!"), "***!");
        assert_eq!(Resolution::default().mask("pass"), "pass");
        assert_eq!(res.mask("ünïcode pass ✓"), "ünïcode *** ✓");
    }
}
