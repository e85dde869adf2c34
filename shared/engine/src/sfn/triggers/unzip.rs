//! Reads a zip archive (a zipped `cdk.out` dropped in the engine's bucket, a CodePipeline
//! input artifact) into a directory: stored and deflated entries, no zip64, no
//! encryption. Entry names that would land outside the directory (`..`, absolute paths)
//! are refused, and so is an archive that inflates past [`MAX_UNZIPPED`].

use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// At most this many bytes are written out of one archive (Lambda's `/tmp` is 512 MB
/// unless configured larger).
pub const MAX_UNZIPPED: u64 = 256 * 1024 * 1024;

const END_OF_DIRECTORY: u32 = 0x0605_4b50;
const DIRECTORY_ENTRY: u32 = 0x0201_4b50;
const LOCAL_HEADER: u32 = 0x0403_4b50;

/// Why an archive could not be read or extracted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZipError {
    #[error("the zip archive is truncated")]
    Truncated,
    #[error("not a zip archive (no end of central directory)")]
    NotAZip,
    #[error("zip64 archives are not supported")]
    Zip64,
    #[error("the zip archive's central directory is damaged")]
    DamagedDirectory,
    #[error("encrypted zip entries are not supported")]
    Encrypted,
    /// Something wrong with one entry (named).
    #[error("{entry}: {problem}")]
    Entry {
        entry: String,
        problem: EntryProblem,
    },
    #[error("the archive inflates past {MAX_UNZIPPED} bytes: not extracted")]
    TooLarge,
    /// A file or folder could not be written.
    #[error("{path}: {message}")]
    Write { path: String, message: String },
}

/// What is wrong with one entry of an archive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    #[error("its local header is damaged")]
    DamagedHeader,
    #[error("the zip archive is truncated")]
    Truncated,
    #[error("cannot inflate: {0}")]
    Inflate(String),
    #[error("its size is not what the zip says")]
    Size,
    #[error("compression method {0} is not supported")]
    Method(u16),
    #[error("the entry's path leaves the archive's directory")]
    Outside,
}

fn entry_error(entry: &Entry, problem: EntryProblem) -> ZipError {
    ZipError::Entry {
        entry: entry.name.clone(),
        problem,
    }
}

fn written(path: &Path, e: std::io::Error) -> ZipError {
    ZipError::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// One file of an archive, as its central directory describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its path inside the archive (`/`-separated).
    pub name: String,
    method: u16,
    compressed: u64,
    size: u64,
    local_offset: u64,
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, ZipError> {
    b.get(at..at + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or(ZipError::Truncated)
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, ZipError> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or(ZipError::Truncated)
}

/// The archive's entries, from its central directory.
pub fn entries(zip: &[u8]) -> Result<Vec<Entry>, ZipError> {
    // The end-of-directory record is 22 bytes plus a comment of up to 64 KiB.
    let floor = zip.len().saturating_sub(22 + 65_535);
    let end = (floor..zip.len().saturating_sub(21))
        .rev()
        .find(|&i| u32_at(zip, i).is_ok_and(|s| s == END_OF_DIRECTORY))
        .ok_or(ZipError::NotAZip)?;
    let count = u16_at(zip, end + 10)?;
    let mut at = u32_at(zip, end + 16)? as usize;
    if count == u16::MAX || at == u32::MAX as usize {
        return Err(ZipError::Zip64);
    }
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        if u32_at(zip, at)? != DIRECTORY_ENTRY {
            return Err(ZipError::DamagedDirectory);
        }
        let flags = u16_at(zip, at + 8)?;
        if flags & 1 != 0 {
            return Err(ZipError::Encrypted);
        }
        let name_len = u16_at(zip, at + 28)? as usize;
        let extra_len = u16_at(zip, at + 30)? as usize;
        let comment_len = u16_at(zip, at + 32)? as usize;
        let name = zip
            .get(at + 46..at + 46 + name_len)
            .ok_or(ZipError::Truncated)?;
        out.push(Entry {
            name: String::from_utf8_lossy(name).replace('\\', "/"),
            method: u16_at(zip, at + 10)?,
            compressed: u64::from(u32_at(zip, at + 20)?),
            size: u64::from(u32_at(zip, at + 24)?),
            local_offset: u64::from(u32_at(zip, at + 42)?),
        });
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(out)
}

/// The bytes of `entry`.
pub fn read(zip: &[u8], entry: &Entry) -> Result<Vec<u8>, ZipError> {
    let at = entry.local_offset as usize;
    if u32_at(zip, at)? != LOCAL_HEADER {
        return Err(entry_error(entry, EntryProblem::DamagedHeader));
    }
    let start = at + 30 + u16_at(zip, at + 26)? as usize + u16_at(zip, at + 28)? as usize;
    let data = zip
        .get(start..start + entry.compressed as usize)
        .ok_or_else(|| entry_error(entry, EntryProblem::Truncated))?;
    match entry.method {
        0 => Ok(data.to_vec()),
        8 => {
            let mut out = Vec::with_capacity(entry.size as usize);
            flate2::read::DeflateDecoder::new(data)
                .take(entry.size + 1)
                .read_to_end(&mut out)
                .map_err(|e| entry_error(entry, EntryProblem::Inflate(e.to_string())))?;
            if out.len() as u64 != entry.size {
                return Err(entry_error(entry, EntryProblem::Size));
            }
            Ok(out)
        }
        m => Err(entry_error(entry, EntryProblem::Method(m))),
    }
}

/// Where `name` goes under `dir`, or `None` when it would leave it.
fn inside(dir: &Path, name: &str) -> Option<PathBuf> {
    let rel = Path::new(name.trim_start_matches("./"));
    let mut out = dir.to_path_buf();
    for c in rel.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

/// Writes every file of `zip` under `dir` (made when missing).
pub fn extract(zip: &[u8], dir: &Path) -> Result<(), ZipError> {
    let mut total = 0u64;
    for entry in entries(zip)? {
        let Some(path) = inside(dir, &entry.name) else {
            return Err(entry_error(&entry, EntryProblem::Outside));
        };
        if entry.name.ends_with('/') {
            std::fs::create_dir_all(&path).map_err(|e| written(&path, e))?;
            continue;
        }
        total += entry.size;
        if total > MAX_UNZIPPED {
            return Err(ZipError::TooLarge);
        }
        let bytes = read(zip, &entry)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| written(parent, e))?;
        }
        std::fs::write(&path, bytes).map_err(|e| written(&path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A zip written by hand: each entry deflated or stored, a central directory, the end
    /// record (with a comment, as some tools write).
    fn zip_of(files: &[(&str, &[u8], bool)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut directory = Vec::new();
        for (name, content, deflate) in files {
            let data = if *deflate {
                let mut e = flate2::write::DeflateEncoder::new(Vec::new(), Default::default());
                e.write_all(content).unwrap();
                e.finish().unwrap()
            } else {
                content.to_vec()
            };
            let method: u16 = if *deflate { 8 } else { 0 };
            let offset = out.len() as u32;
            out.extend(LOCAL_HEADER.to_le_bytes());
            out.extend([20, 0, 0, 0]);
            out.extend(method.to_le_bytes());
            out.extend([0u8; 8]); // time, date, crc (not checked)
            out.extend((data.len() as u32).to_le_bytes());
            out.extend((content.len() as u32).to_le_bytes());
            out.extend((name.len() as u16).to_le_bytes());
            out.extend(0u16.to_le_bytes());
            out.extend(name.as_bytes());
            out.extend(&data);
            directory.extend(DIRECTORY_ENTRY.to_le_bytes());
            directory.extend([20, 0, 20, 0, 0, 0]);
            directory.extend(method.to_le_bytes());
            directory.extend([0u8; 8]);
            directory.extend((data.len() as u32).to_le_bytes());
            directory.extend((content.len() as u32).to_le_bytes());
            directory.extend((name.len() as u16).to_le_bytes());
            directory.extend([0u8; 12]);
            directory.extend(offset.to_le_bytes());
            directory.extend(name.as_bytes());
        }
        let dir_at = out.len() as u32;
        out.extend(&directory);
        out.extend(END_OF_DIRECTORY.to_le_bytes());
        out.extend([0u8; 4]);
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((files.len() as u16).to_le_bytes());
        out.extend((directory.len() as u32).to_le_bytes());
        out.extend(dir_at.to_le_bytes());
        out.extend(3u16.to_le_bytes());
        out.extend(b"abc");
        out
    }

    #[test]
    fn stored_and_deflated_entries_are_extracted() {
        let big = "x".repeat(10_000);
        let zip = zip_of(&[
            ("manifest.json", b"{\"version\":\"36.0.0\"}", false),
            ("sub/App.template.json", big.as_bytes(), true),
        ]);
        let dir = std::env::temp_dir().join(format!("sf-unzip-{}", uuid::Uuid::new_v4()));
        extract(&zip, &dir).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("manifest.json")).unwrap(),
            "{\"version\":\"36.0.0\"}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("sub/App.template.json")).unwrap(),
            big
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_path_out_of_the_directory_is_refused() {
        let dir = std::env::temp_dir().join(format!("sf-unzip-{}", uuid::Uuid::new_v4()));
        for name in ["../evil", "/etc/evil", "a/../../evil"] {
            let zip = zip_of(&[(name, b"x", false)]);
            let e = extract(&zip, &dir).unwrap_err();
            assert!(
                matches!(
                    &e,
                    ZipError::Entry {
                        problem: EntryProblem::Outside,
                        ..
                    }
                ),
                "{name}: {e}"
            );
            assert!(e.to_string().contains("leaves the archive"), "{name}: {e}");
        }
        assert!(!dir.exists());
    }

    #[test]
    fn not_a_zip_and_a_truncated_zip_are_errors() {
        assert_eq!(
            entries(b"{\"Resources\":{}}").unwrap_err(),
            ZipError::NotAZip
        );
        let zip = zip_of(&[("a", b"hello", true)]);
        let cut = &zip[10..];
        assert!(extract(cut, &std::env::temp_dir().join("sf-unzip-never")).is_err());
    }
}
