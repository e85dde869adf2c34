//! A deterministic zip of a directory: the same files give the same bytes, whatever the
//! file system's order, the files' times or their owners.
//!
//! Entries are the directory's regular files (symbolic links followed, as long as they
//! lead to a file or directory inside the one zipped: a link out of it, or a directory
//! reached twice through links, is refused), named by their path below it with `/`, sorted by that name; every entry has the same time (1980-01-01
//! 00:00, the first the format can hold), mode `0644` (`0755` when any execute bit is
//! set, so a `bootstrap` stays executable), and is deflated (stored when that is no
//! smaller). No directory entries, no extra fields, no zip64: an archive past 65,535
//! entries or 4 GiB is refused.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::DeflateEncoder;

/// The DOS date of every entry: 1980-01-01 (the time is 00:00:00, all zero bits).
const DOS_DATE: u16 = (1 << 5) | 1;
/// Version needed to extract (2.0: deflate) and made by (Unix, 2.0).
const VERSION_NEEDED: u16 = 20;
const VERSION_MADE_BY: u16 = (3 << 8) | 20;
/// General purpose flag: names are UTF-8.
const FLAG_UTF8: u16 = 1 << 11;
const STORED: u16 = 0;
const DEFLATED: u16 = 8;

/// Why a directory could not be zipped.
#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    #[error("{path}: {what} is more than a zip without zip64 holds")]
    TooLarge { path: PathBuf, what: &'static str },
    #[error(
        "{path} leads to {target}, outside the asset directory {dir}: an asset's links must \
         stay inside it (replace the link with what it points to)"
    )]
    Outside {
        path: PathBuf,
        target: PathBuf,
        dir: PathBuf,
    },
    #[error("{path}: a symbolic link leads back to a directory above it ({target})")]
    Loop { path: PathBuf, target: PathBuf },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ZipError + '_ {
    move |source| ZipError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One file to put in the archive.
struct Entry {
    name: String,
    path: PathBuf,
    executable: bool,
}

/// The regular files below `dir`, sorted by their name in the archive.
fn entries(dir: &Path) -> Result<Vec<Entry>, ZipError> {
    if !dir.is_dir() {
        return Err(ZipError::NotADirectory(dir.to_path_buf()));
    }
    let top = std::fs::canonicalize(dir).map_err(io(dir))?;
    let mut out = Vec::new();
    // Each directory to read, with the resolved directories above it (a link back to one
    // of them would never end).
    let mut pending = vec![(dir.to_path_buf(), String::new(), vec![top.clone()])];
    while let Some((path, prefix, above)) = pending.pop() {
        for item in std::fs::read_dir(&path).map_err(io(&path))? {
            let item = item.map_err(io(&path))?;
            let child = item.path();
            let name = format!("{prefix}{}", item.file_name().to_string_lossy());
            // `metadata` follows symbolic links, as the CDK's own packaging does.
            let meta = std::fs::metadata(&child).map_err(io(&child))?;
            if item.file_type().map_err(io(&child))?.is_symlink() {
                let target = std::fs::canonicalize(&child).map_err(io(&child))?;
                if !target.starts_with(&top) {
                    return Err(ZipError::Outside {
                        path: child,
                        target,
                        dir: dir.to_path_buf(),
                    });
                }
            }
            if meta.is_dir() {
                let target = std::fs::canonicalize(&child).map_err(io(&child))?;
                if above.contains(&target) {
                    return Err(ZipError::Loop {
                        path: child,
                        target,
                    });
                }
                let mut below = above.clone();
                below.push(target);
                pending.push((child, format!("{name}/"), below));
            } else if meta.is_file() {
                out.push(Entry {
                    name,
                    path: child,
                    executable: is_executable(&meta),
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_: &std::fs::Metadata) -> bool {
    false
}

fn u32_of(n: usize, path: &Path, what: &'static str) -> Result<u32, ZipError> {
    u32::try_from(n).map_err(|_| ZipError::TooLarge {
        path: path.to_path_buf(),
        what,
    })
}

/// What the central directory keeps of an entry written.
struct Written {
    name: String,
    method: u16,
    crc: u32,
    compressed: u32,
    size: u32,
    mode: u32,
    offset: u32,
}

/// The zip of `dir` (see the module documentation).
pub fn zip_directory(dir: &Path) -> Result<Vec<u8>, ZipError> {
    let files = entries(dir)?;
    if files.len() > usize::from(u16::MAX) {
        return Err(ZipError::TooLarge {
            path: dir.to_path_buf(),
            what: "the number of files",
        });
    }
    let mut out = Vec::new();
    let mut written = Vec::with_capacity(files.len());
    for f in files {
        let data = std::fs::read(&f.path).map_err(io(&f.path))?;
        let deflated = deflate(&data).map_err(io(&f.path))?;
        let (method, body) = if deflated.len() < data.len() {
            (DEFLATED, deflated)
        } else {
            (STORED, data.clone())
        };
        let w = Written {
            crc: crc32fast::hash(&data),
            compressed: u32_of(body.len(), &f.path, "a file")?,
            size: u32_of(data.len(), &f.path, "a file")?,
            mode: if f.executable { 0o100755 } else { 0o100644 },
            offset: u32_of(out.len(), dir, "the archive")?,
            name: f.name,
            method,
        };
        local_header(&mut out, &w);
        out.extend_from_slice(&body);
        written.push(w);
    }
    let directory_start = u32_of(out.len(), dir, "the archive")?;
    for w in &written {
        central_header(&mut out, w);
    }
    let directory_size = u32_of(out.len(), dir, "the archive")? - directory_start;
    let count = written.len() as u16;
    put32(&mut out, 0x0605_4b50);
    put16(&mut out, 0); // this disk
    put16(&mut out, 0); // the disk the directory starts on
    put16(&mut out, count);
    put16(&mut out, count);
    put32(&mut out, directory_size);
    put32(&mut out, directory_start);
    put16(&mut out, 0); // comment length
    Ok(out)
}

fn deflate(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut e = DeflateEncoder::new(Vec::new(), Compression::default());
    e.write_all(data)?;
    e.finish()
}

fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Method, time, date, CRC, sizes and name length: the part both headers share.
fn common(out: &mut Vec<u8>, w: &Written) {
    put16(out, FLAG_UTF8);
    put16(out, w.method);
    put16(out, 0); // time 00:00:00
    put16(out, DOS_DATE);
    put32(out, w.crc);
    put32(out, w.compressed);
    put32(out, w.size);
    put16(out, w.name.len() as u16);
    put16(out, 0); // extra field length
}

fn local_header(out: &mut Vec<u8>, w: &Written) {
    put32(out, 0x0403_4b50);
    put16(out, VERSION_NEEDED);
    common(out, w);
    out.extend_from_slice(w.name.as_bytes());
}

fn central_header(out: &mut Vec<u8>, w: &Written) {
    put32(out, 0x0201_4b50);
    put16(out, VERSION_MADE_BY);
    put16(out, VERSION_NEEDED);
    common(out, w);
    put16(out, 0); // comment length
    put16(out, 0); // disk number
    put16(out, 0); // internal attributes
    put32(out, w.mode << 16);
    put32(out, w.offset);
    out.extend_from_slice(w.name.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn tree(root: &Path) {
        std::fs::create_dir_all(root.join("lib/deep")).unwrap();
        std::fs::write(
            root.join("index.js"),
            "exports.handler = async () => 1;\n".repeat(50),
        )
        .unwrap();
        std::fs::write(root.join("lib/deep/a.txt"), b"a").unwrap();
        std::fs::write(root.join("lib/b.bin"), [0u8, 255, 7]).unwrap();
        std::fs::write(root.join("bootstrap"), "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let exe = std::fs::Permissions::from_mode(0o750);
            std::fs::set_permissions(root.join("bootstrap"), exe).unwrap();
        }
    }

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "stackflow-zip-{name}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The entries of an archive, read back with its central directory: name, mode,
    /// content (inflated).
    fn read_back(zip: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
        let eocd = zip.len() - 22;
        assert_eq!(&zip[eocd..eocd + 4], &[0x50, 0x4b, 5, 6]);
        let u16_at = |i: usize| u16::from_le_bytes([zip[i], zip[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes(zip[i..i + 4].try_into().unwrap());
        let count = usize::from(u16_at(eocd + 10));
        let mut at = u32_at(eocd + 16) as usize;
        let mut out = Vec::new();
        for _ in 0..count {
            assert_eq!(u32_at(at), 0x0201_4b50);
            let method = u16_at(at + 10);
            assert_eq!((u16_at(at + 12), u16_at(at + 14)), (0, DOS_DATE));
            let crc = u32_at(at + 16);
            let compressed = u32_at(at + 20) as usize;
            let name_len = usize::from(u16_at(at + 28));
            let mode = u32_at(at + 38) >> 16;
            let local = u32_at(at + 42) as usize;
            let name = String::from_utf8(zip[at + 46..at + 46 + name_len].to_vec()).unwrap();
            let data_at = local + 30 + usize::from(u16_at(local + 26));
            let raw = &zip[data_at..data_at + compressed];
            let data = if method == DEFLATED {
                let mut v = Vec::new();
                flate2::read::DeflateDecoder::new(raw)
                    .read_to_end(&mut v)
                    .unwrap();
                v
            } else {
                raw.to_vec()
            };
            assert_eq!(crc32fast::hash(&data), crc, "{name}");
            out.push((name, mode, data));
            at += 46 + name_len;
        }
        out
    }

    #[test]
    fn a_directory_zips_sorted_with_its_content_and_modes() {
        let dir = temp("content");
        tree(&dir);
        let zip = zip_directory(&dir).unwrap();
        let entries = read_back(&zip);
        let names: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            names,
            ["bootstrap", "index.js", "lib/b.bin", "lib/deep/a.txt"]
        );
        assert_eq!(entries[2].2, [0u8, 255, 7]);
        assert_eq!(entries[3].2, b"a");
        assert!(entries[1].2.starts_with(b"exports.handler"));
        #[cfg(unix)]
        assert_eq!(entries[0].1, 0o100755);
        assert_eq!(entries[1].1, 0o100644);
        // The repeated text is deflated: the archive is smaller than the file alone.
        assert!(zip.len() < entries[1].2.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_same_files_give_the_same_bytes_whatever_their_times_and_order() {
        let one = temp("one");
        tree(&one);
        let two = temp("two");
        // Made in another order, later.
        std::fs::create_dir_all(two.join("lib")).unwrap();
        std::fs::write(two.join("lib/b.bin"), [0u8, 255, 7]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        tree(&two);
        assert_eq!(zip_directory(&one).unwrap(), zip_directory(&two).unwrap());
        std::fs::write(two.join("lib/deep/a.txt"), b"b").unwrap();
        assert_ne!(zip_directory(&one).unwrap(), zip_directory(&two).unwrap());
        std::fs::remove_dir_all(&one).unwrap();
        std::fs::remove_dir_all(&two).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn links_inside_are_followed_and_links_out_or_back_up_are_refused() {
        use std::os::unix::fs::symlink;
        let dir = temp("links");
        tree(&dir);
        // pnpm's layout: a link to another directory inside is zipped under both names.
        symlink(dir.join("lib"), dir.join("alias")).unwrap();
        let names: Vec<String> = read_back(&zip_directory(&dir).unwrap())
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert!(names.contains(&"alias/b.bin".to_string()), "{names:?}");
        // A link out of the directory.
        let outside = temp("outside");
        std::fs::write(outside.join("id_rsa"), b"key").unwrap();
        symlink(outside.join("id_rsa"), dir.join("lib/key")).unwrap();
        let e = zip_directory(&dir).unwrap_err();
        assert!(matches!(e, ZipError::Outside { .. }), "{e}");
        assert!(e.to_string().contains("id_rsa"), "{e}");
        std::fs::remove_file(dir.join("lib/key")).unwrap();
        // A link back up: refused, not followed for ever.
        symlink(&dir, dir.join("lib/deep/up")).unwrap();
        let e = zip_directory(&dir).unwrap_err();
        assert!(matches!(e, ZipError::Loop { .. }), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn an_empty_directory_is_an_empty_archive_and_a_file_is_refused() {
        let dir = temp("empty");
        let zip = zip_directory(&dir).unwrap();
        assert_eq!(zip.len(), 22);
        assert!(read_back(&zip).is_empty());
        std::fs::write(dir.join("f"), b"x").unwrap();
        assert!(matches!(
            zip_directory(&dir.join("f")),
            Err(ZipError::NotADirectory(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
