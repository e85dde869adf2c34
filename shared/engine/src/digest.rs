//! Where the key of the digests recorded in place of secrets lives (see
//! [`stackflow_core::secrets`]). It is kept out of the log: a reader of the events sees
//! that a secret changed, never what it is, and cannot test guesses against the digests
//! without the key.
//!
//! - The embedded store keeps it beside its database, in `digest.key` (hex, mode 0600).
//! - The DynamoDB store and the Lambda tasks keep it in the engine's bucket
//!   ([`crate::sfn::digest`]).
//!
//! One key per store; each stack derives its own ([`DigestKey::for_stack`]). Losing the
//! key costs one update of each resource that holds a secret (its digest changes), nothing
//! else.

use std::io::{ErrorKind, Read, Write};
use std::path::Path;

use stackflow_core::secrets::DigestKey;

/// The file name of the key in a local store's directory.
pub const LOCAL_KEY_FILE: &str = "digest.key";

/// A new random key.
pub fn new_key() -> DigestKey {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    DigestKey::new(bytes)
}

/// The key of the local store in `dir`, made (mode 0600) when there is none. Two
/// processes that make it at once agree: the first file written wins.
pub fn local_key(dir: &Path) -> std::io::Result<DigestKey> {
    let path = dir.join(LOCAL_KEY_FILE);
    let bad = || {
        std::io::Error::new(
            ErrorKind::InvalidData,
            format!(
                "{} is not a digest key (64 hex digits); remove it to make a new one \
                 (each resource that holds a secret is then updated once)",
                path.display()
            ),
        )
    };
    loop {
        match std::fs::File::open(&path) {
            Ok(mut f) => {
                let mut text = String::new();
                f.read_to_string(&mut text)?;
                if text.is_empty() {
                    // Another process is writing it.
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
                return DigestKey::from_hex(&text).ok_or_else(bad);
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::fs::create_dir_all(dir)?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        match options.open(&path) {
            Ok(mut f) => {
                let key = new_key();
                f.write_all(key.to_hex().as_bytes())?;
                f.sync_all()?;
                return Ok(key);
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_key_is_made_once_private_and_kept() {
        let dir = std::env::temp_dir().join(format!(
            "stackflow-digest-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        let first = local_key(&dir).unwrap();
        let again = local_key(&dir).unwrap();
        assert_eq!(first, again);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(LOCAL_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(dir.join(LOCAL_KEY_FILE), "not a key").unwrap();
        let e = local_key(&dir).unwrap_err();
        assert!(e.to_string().contains("remove it"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn new_keys_differ() {
        assert_ne!(new_key(), new_key());
    }
}
