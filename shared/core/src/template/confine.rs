//! Every path a cloud assembly names stays inside it: a stack's `templateFile`, an asset
//! manifest's `file`, a nested assembly's `directoryName`, a nested stack's
//! `aws:asset:path`, and each asset's source. A path is refused when it is absolute, or
//! when it resolves (`..` and symbolic links followed) outside the assembly's directory:
//! otherwise a crafted `cdk.out` (a zipped one dropped in the engine's bucket, say) could
//! read, and upload as an asset, any file the deploy can read.

use std::path::{Component, Path as FsPath, PathBuf};

/// Why a path a cloud assembly names is not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Outside {
    /// An absolute path.
    #[error("`{named}` is an absolute path: a cloud assembly names its files relative to itself")]
    Absolute { named: String },
    /// A path that resolves outside the assembly (`..`, or a symbolic link).
    #[error(
        "{} resolves to {}, outside the cloud assembly {}: every file a cloud assembly names \
         must be inside it (run `cdk synth` again, or replace the symbolic link with what it \
         points to)",
        path.display(),
        resolved.display(),
        root.display()
    )]
    Escapes {
        path: PathBuf,
        resolved: PathBuf,
        root: PathBuf,
    },
}

/// The directory a cloud assembly (or a template alone) lives in, with its resolved form.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    shown: PathBuf,
    resolved: PathBuf,
}

impl Root {
    /// The root `dir` (which must exist).
    pub fn new(dir: &FsPath) -> std::io::Result<Root> {
        Ok(Root {
            shown: dir.to_path_buf(),
            resolved: std::fs::canonicalize(dir)?,
        })
    }

    /// `named`, relative to `base` (a directory inside the root), when it stays inside
    /// the root; `Err` says why not. A path that does not exist is returned as it is
    /// (reading it fails later, saying so), unless it is absolute or climbs out with `..`.
    pub fn resolve(&self, base: &FsPath, named: &str) -> Result<PathBuf, Outside> {
        let path = FsPath::new(named);
        if path.is_absolute() || path.components().any(|c| matches!(c, Component::Prefix(_))) {
            return Err(Outside::Absolute {
                named: named.to_string(),
            });
        }
        let joined = base.join(path);
        self.check(&joined).map(|()| joined)
    }

    /// Ok when `path` (existing or not) is inside the root once resolved.
    pub fn check(&self, path: &FsPath) -> Result<(), Outside> {
        let resolved = match std::fs::canonicalize(path) {
            Ok(resolved) => resolved,
            Err(_) => lexical(path),
        };
        if resolved.starts_with(&self.resolved) {
            return Ok(());
        }
        Err(Outside::Escapes {
            path: path.to_path_buf(),
            resolved,
            root: self.shown.clone(),
        })
    }
}

impl Root {
    /// Ok when every symbolic link below the directory `dir` (followed, as a zip of it
    /// follows them) leads inside the root. A link back to a directory above is not
    /// followed (the zip refuses it).
    pub fn check_tree(&self, dir: &FsPath) -> Result<(), Outside> {
        let Ok(top) = std::fs::canonicalize(dir) else {
            return Ok(());
        };
        let mut pending = vec![(dir.to_path_buf(), vec![top])];
        while let Some((path, above)) = pending.pop() {
            let Ok(items) = std::fs::read_dir(&path) else {
                continue;
            };
            for item in items.flatten() {
                let child = item.path();
                if item.file_type().is_ok_and(|t| t.is_symlink()) {
                    self.check(&child)?;
                }
                let Ok(resolved) = std::fs::canonicalize(&child) else {
                    continue;
                };
                if resolved.is_dir() && !above.contains(&resolved) {
                    let mut below = above.clone();
                    below.push(resolved);
                    pending.push((child, below));
                }
            }
        }
        Ok(())
    }
}

/// `path` as it would resolve, for a path that does not exist: its longest existing
/// ancestor resolved, and the rest of its components applied without reading the disk
/// (nothing there can be a link).
fn lexical(path: &FsPath) -> PathBuf {
    let parts: Vec<Component> = path.components().collect();
    for i in (0..=parts.len()).rev() {
        let ancestor: PathBuf = parts[..i].iter().collect();
        let ancestor = if ancestor.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            ancestor
        };
        let Ok(mut resolved) = std::fs::canonicalize(&ancestor) else {
            continue;
        };
        for c in &parts[i..] {
            match c {
                Component::ParentDir => {
                    resolved.pop();
                }
                Component::CurDir => {}
                other => resolved.push(other),
            }
        }
        return resolved;
    }
    path.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (PathBuf, Root) {
        let base = std::env::temp_dir().join(format!(
            "stackflow-confine-{}-{}",
            std::process::id(),
            uuid_like()
        ));
        let root = base.join("cdk.out");
        std::fs::create_dir_all(root.join("asset.abc")).unwrap();
        std::fs::write(root.join("App.template.json"), "{}").unwrap();
        std::fs::write(base.join("secret.txt"), "s").unwrap();
        (base, Root::new(&root).unwrap())
    }

    fn uuid_like() -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        N.fetch_add(1, Ordering::Relaxed)
    }

    #[test]
    fn paths_inside_the_assembly_are_kept() {
        let (base, root) = tree();
        let dir = base.join("cdk.out");
        assert_eq!(
            root.resolve(&dir, "App.template.json").unwrap(),
            dir.join("App.template.json")
        );
        assert!(root.resolve(&dir, "asset.abc").is_ok());
        // A stage's manifest names the top assembly's assets with `..`.
        std::fs::create_dir_all(dir.join("assembly-Stage")).unwrap();
        assert!(
            root.resolve(&dir.join("assembly-Stage"), "../asset.abc")
                .is_ok()
        );
        // Missing but inside: returned, to fail when read.
        assert!(root.resolve(&dir, "Missing.template.json").is_ok());
    }

    #[test]
    fn paths_that_leave_the_assembly_are_refused() {
        let (base, root) = tree();
        let dir = base.join("cdk.out");
        let abs = base.join("secret.txt").display().to_string();
        let absolute = root.resolve(&dir, &abs).unwrap_err();
        assert!(matches!(absolute, Outside::Absolute { .. }), "{absolute}");
        assert!(absolute.to_string().contains("absolute"));
        let e = root.resolve(&dir, "../secret.txt").unwrap_err();
        assert!(matches!(e, Outside::Escapes { .. }), "{e}");
        assert!(e.to_string().contains("outside the cloud assembly"), "{e}");
        assert!(root.resolve(&dir, "../nothing/there").is_err());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(base.join("secret.txt"), dir.join("link.json")).unwrap();
            let e = root.resolve(&dir, "link.json").unwrap_err();
            assert!(e.to_string().contains("secret.txt"), "{e}");
            std::os::unix::fs::symlink(&base, dir.join("asset.up")).unwrap();
            assert!(root.resolve(&dir, "asset.up").is_err());
            assert!(
                root.resolve(&dir, "asset.up/cdk.out/App.template.json")
                    .is_ok()
            );
        }
    }
}
