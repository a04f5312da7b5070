//! Which mount options are credentials: they are stored by the master and
//! handed only to workers, never printed, logged or listed.

use std::borrow::Cow;

/// Whether an option's value must not be shown (matched case-insensitively on the key:
/// anything naming a secret, password, token, key, credential or SAS). The one rule for
/// the master's mount listings and `cvctl mount ls`.
pub fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["secret", "password", "token", "key", "credential", "sas"].iter().any(|s| k.contains(s))
}

/// The options with secret values replaced by `***`.
pub fn redact<'a>(options: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<(String, String)> {
    options
        .into_iter()
        .map(|(k, v)| {
            let v: Cow<'_, str> = if is_secret(k) { "***".into() } else { v.into() };
            (k.to_owned(), v.into_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_hidden_and_the_rest_shown() {
        let r = redact([
            ("endpoint", "http://127.0.0.1:9000"),
            ("secret_access_key", "s3cr3t"),
            ("access_key_id", "AKID"),
            ("session_token", "tok"),
            ("region", "us-east-1"),
        ]);
        let shown: Vec<&str> = r.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(shown, ["http://127.0.0.1:9000", "***", "***", "***", "us-east-1"]);
    }
}
