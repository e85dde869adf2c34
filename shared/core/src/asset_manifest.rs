//! The asset manifest of a cloud assembly stack (`<Stack>.assets.json`): the files and
//! container images the stack's resources refer to, where each comes from and where it
//! is to be published.

use std::path::{Path as FsPath, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use crate::error::{ErrorKind, Result, TemplateError};
use crate::limits::read_bounded;

/// The assets of one stack.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AssetManifest {
    /// The file the manifest was read from.
    pub file: PathBuf,
    /// File assets (`files`), in manifest order.
    pub files: Vec<FileAsset>,
    /// Container image assets (`dockerImages`), in manifest order.
    pub images: Vec<ImageAsset>,
}

/// How a file asset's source becomes the object that is uploaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packaging {
    /// The file as it is.
    File,
    /// A directory, zipped.
    ZipDirectory,
}

/// One file asset: a file or a directory of the assembly, and where it goes.
#[derive(Debug, Clone, PartialEq)]
pub struct FileAsset {
    /// Its id in the manifest (the source's hash).
    pub id: String,
    /// What it is, as the CDK names it (`Handler/Code`), else the id.
    pub display_name: String,
    /// The file or directory, resolved against the assembly directory.
    pub path: PathBuf,
    /// How it is packaged.
    pub packaging: Packaging,
    /// Where it is published, by destination id.
    pub destinations: Vec<FileDestination>,
}

/// An S3 destination of a file asset, with its `${AWS::...}` placeholders as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDestination {
    /// The destination id.
    pub id: String,
    /// `bucketName`.
    pub bucket_name: String,
    /// `objectKey`.
    pub object_key: String,
    /// `region`, when the destination names one.
    pub region: Option<String>,
    /// `assumeRoleArn`, when given.
    pub assume_role_arn: Option<String>,
}

/// One container image asset: a directory with a Dockerfile, built and pushed.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageAsset {
    /// Its id in the manifest.
    pub id: String,
    /// What it is, as the CDK names it, else the id.
    pub display_name: String,
    /// The build context, resolved against the assembly directory (`None` for an image
    /// made by a command, `source.executable`).
    pub directory: Option<PathBuf>,
    /// `source.dockerFile`, relative to the directory.
    pub dockerfile: Option<String>,
    /// `source.dockerBuildArgs`.
    pub build_args: IndexMap<String, String>,
    /// `source.dockerBuildTarget`.
    pub target: Option<String>,
    /// `source.platform`.
    pub platform: Option<String>,
    /// `source.networkMode`.
    pub network_mode: Option<String>,
    /// `source.executable`: a command that builds the image and prints its tag.
    pub executable: Option<Vec<String>>,
    /// Where it is pushed.
    pub destinations: Vec<ImageDestination>,
}

/// An ECR destination of an image asset, placeholders as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageDestination {
    /// The destination id.
    pub id: String,
    /// `repositoryName`.
    pub repository_name: String,
    /// `imageTag`.
    pub image_tag: String,
    /// `region`, when given.
    pub region: Option<String>,
    /// `assumeRoleArn`, when given.
    pub assume_role_arn: Option<String>,
}

/// What is wrong in an asset manifest. `what` names the asset or destination, e.g. ``file
/// asset `x` ``.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssetManifestError {
    /// A section that must be an object (`files`, `dockerImages`, `destinations`).
    #[error("`{key}` is not an object")]
    NotAnObject { key: String },
    /// A required key is missing.
    #[error("{what} has no `{key}`")]
    Missing { what: String, key: String },
    /// A file asset made by a command.
    #[error(
        "{what} ({name}) is made by a command (`source.executable`), which stackflow does not run"
    )]
    MadeByCommand { what: String, name: String },
    /// A packaging other than `file` and `zip`.
    #[error("{what} has an unknown packaging `{packaging}`")]
    UnknownPackaging { what: String, packaging: String },
}

type Parsed<T> = std::result::Result<T, AssetManifestError>;

fn manifest_error(file: &FsPath, message: impl Into<String>) -> TemplateError {
    TemplateError::new(ErrorKind::Assembly, "", message).in_file(file.display())
}

/// Reads an asset manifest; relative source paths are resolved against its directory.
pub fn load_asset_manifest(file: &FsPath) -> Result<AssetManifest> {
    let text = read_bounded(file)
        .map_err(|e| manifest_error(file, format!("cannot read the asset manifest: {e}")))?
        .ok_or_else(|| manifest_error(file, "the asset manifest is too large"))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| manifest_error(file, format!("invalid JSON: {e}")))?;
    let dir = file.parent().unwrap_or(FsPath::new("."));
    parse_asset_manifest(&value, dir).map_err(|e| manifest_error(file, e.to_string()))
}

/// The manifest in `value`, sources resolved against `dir`. `Err` says what is wrong.
pub fn parse_asset_manifest(value: &Value, dir: &FsPath) -> Parsed<AssetManifest> {
    let mut out = AssetManifest::default();
    for (id, asset) in entries(value, "files")? {
        out.files.push(file_asset(id, asset, dir)?);
    }
    for (id, asset) in entries(value, "dockerImages")? {
        out.images.push(image_asset(id, asset, dir)?);
    }
    Ok(out)
}

fn entries<'v>(value: &'v Value, key: &str) -> Parsed<Vec<(&'v String, &'v Value)>> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(vec![]),
        Some(Value::Object(m)) => Ok(m.iter().collect()),
        Some(_) => Err(AssetManifestError::NotAnObject {
            key: key.to_string(),
        }),
    }
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn required(v: &Value, key: &str, what: &str) -> Parsed<String> {
    text(v, key).ok_or_else(|| AssetManifestError::Missing {
        what: what.to_string(),
        key: key.to_string(),
    })
}

fn display_name(id: &str, asset: &Value) -> String {
    text(asset, "displayName").unwrap_or_else(|| id.to_string())
}

fn source<'v>(asset: &'v Value, what: &str) -> Parsed<&'v Value> {
    asset
        .get("source")
        .ok_or_else(|| AssetManifestError::Missing {
            what: what.to_string(),
            key: "source".to_string(),
        })
}

fn file_asset(id: &str, asset: &Value, dir: &FsPath) -> Parsed<FileAsset> {
    let what = format!("file asset `{id}`");
    let source = source(asset, &what)?;
    if source.get("executable").is_some() {
        return Err(AssetManifestError::MadeByCommand {
            what,
            name: display_name(id, asset),
        });
    }
    let path = required(source, "path", &format!("the source of {what}"))?;
    let packaging = match source.get("packaging").and_then(Value::as_str) {
        None | Some("file") => Packaging::File,
        Some("zip") => Packaging::ZipDirectory,
        Some(other) => {
            return Err(AssetManifestError::UnknownPackaging {
                what,
                packaging: other.to_string(),
            });
        }
    };
    let mut destinations = Vec::new();
    for (dest_id, d) in entries(asset, "destinations")? {
        let what = format!("destination `{dest_id}` of {what}");
        destinations.push(FileDestination {
            id: dest_id.clone(),
            bucket_name: required(d, "bucketName", &what)?,
            object_key: required(d, "objectKey", &what)?,
            region: text(d, "region"),
            assume_role_arn: text(d, "assumeRoleArn"),
        });
    }
    Ok(FileAsset {
        id: id.to_string(),
        display_name: display_name(id, asset),
        path: dir.join(path),
        packaging,
        destinations,
    })
}

fn image_asset(id: &str, asset: &Value, dir: &FsPath) -> Parsed<ImageAsset> {
    let what = format!("container image asset `{id}`");
    let source = source(asset, &what)?;
    let executable = source.get("executable").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    });
    let build_args = source
        .get("dockerBuildArgs")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    let mut destinations = Vec::new();
    for (dest_id, d) in entries(asset, "destinations")? {
        let what = format!("destination `{dest_id}` of {what}");
        destinations.push(ImageDestination {
            id: dest_id.clone(),
            repository_name: required(d, "repositoryName", &what)?,
            image_tag: required(d, "imageTag", &what)?,
            region: text(d, "region"),
            assume_role_arn: text(d, "assumeRoleArn"),
        });
    }
    Ok(ImageAsset {
        id: id.to_string(),
        display_name: display_name(id, asset),
        directory: text(source, "directory").map(|d| dir.join(d)),
        dockerfile: text(source, "dockerFile"),
        build_args,
        target: text(source, "dockerBuildTarget"),
        platform: text(source, "platform"),
        network_mode: text(source, "networkMode"),
        executable,
        destinations,
    })
}

/// The values of the `${AWS::...}` placeholders of a destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholders {
    /// `${AWS::AccountId}`.
    pub account_id: String,
    /// `${AWS::Region}`: the destination's own region when it names one.
    pub region: String,
}

impl Placeholders {
    /// The partition of the region (`aws`, `aws-cn`, `aws-us-gov`, `aws-iso`, ...).
    pub fn partition(&self) -> &'static str {
        crate::partition::partition(&self.region)
    }

    /// `text` with `${AWS::AccountId}`, `${AWS::Region}` and `${AWS::Partition}` replaced
    /// (other text, including other `${...}`, stays as written).
    pub fn substitute(&self, text: &str) -> String {
        text.replace("${AWS::AccountId}", &self.account_id)
            .replace("${AWS::Region}", &self.region)
            .replace("${AWS::Partition}", self.partition())
    }

    /// These placeholders for a destination that names `region` (else the same).
    pub fn in_region(&self, region: Option<&str>) -> Placeholders {
        Placeholders {
            account_id: self.account_id.clone(),
            region: region.unwrap_or(&self.region).to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest() -> Value {
        json!({
            "version": "55.0.0",
            "files": {
                "abc": {
                    "displayName": "Fn/Code",
                    "source": {"path": "asset.abc", "packaging": "zip"},
                    "destinations": {"d1": {
                        "bucketName": "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}",
                        "objectKey": "abc.zip",
                        "assumeRoleArn": "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/r"
                    }}
                },
                "def": {
                    "source": {"path": "Nested.template.json", "packaging": "file"},
                    "destinations": {"d2": {
                        "bucketName": "b", "objectKey": "def.json", "region": "eu-west-1"
                    }}
                }
            },
            "dockerImages": {
                "img": {
                    "displayName": "Image",
                    "source": {"directory": "asset.img", "dockerBuildArgs": {"A": "1"},
                               "dockerBuildTarget": "prod", "platform": "linux/arm64"},
                    "destinations": {"d3": {
                        "repositoryName": "cdk-hnb659fds-container-assets-${AWS::AccountId}-${AWS::Region}",
                        "imageTag": "img"
                    }}
                }
            }
        })
    }

    #[test]
    fn files_and_images_are_read_with_their_destinations() {
        let m = parse_asset_manifest(&manifest(), FsPath::new("/out")).unwrap();
        assert_eq!(m.files.len(), 2);
        let zip = &m.files[0];
        assert_eq!(zip.display_name, "Fn/Code");
        assert_eq!(zip.path, PathBuf::from("/out/asset.abc"));
        assert_eq!(zip.packaging, Packaging::ZipDirectory);
        assert_eq!(zip.destinations[0].object_key, "abc.zip");
        assert!(zip.destinations[0].region.is_none());
        let file = &m.files[1];
        assert_eq!(file.display_name, "def");
        assert_eq!(file.packaging, Packaging::File);
        assert_eq!(file.destinations[0].region.as_deref(), Some("eu-west-1"));
        let img = &m.images[0];
        assert_eq!(img.directory, Some(PathBuf::from("/out/asset.img")));
        assert_eq!(img.build_args.get("A").map(String::as_str), Some("1"));
        assert_eq!(img.target.as_deref(), Some("prod"));
        assert_eq!(img.destinations[0].image_tag, "img");
    }

    #[test]
    fn bad_manifests_say_what_is_wrong() {
        let no_key = json!({"files": {"x": {"source": {"path": "p"},
            "destinations": {"d": {"bucketName": "b"}}}}});
        let e = parse_asset_manifest(&no_key, FsPath::new(".")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "destination `d` of file asset `x` has no `objectKey`"
        );
        let packaging = json!({"files": {"x": {"source": {"path": "p", "packaging": "tar"}}}});
        let e = parse_asset_manifest(&packaging, FsPath::new(".")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "file asset `x` has an unknown packaging `tar`"
        );
        let command = json!({"files": {"x": {"source": {"executable": ["make"]}}}});
        let e = parse_asset_manifest(&command, FsPath::new(".")).unwrap_err();
        assert!(matches!(e, AssetManifestError::MadeByCommand { .. }), "{e}");
        assert!(e.to_string().contains("executable"), "{e}");
    }

    #[test]
    fn placeholders_are_substituted_per_destination_region() {
        let p = Placeholders {
            account_id: "123456789012".into(),
            region: "us-east-1".into(),
        };
        assert_eq!(
            p.substitute("arn:${AWS::Partition}:iam::${AWS::AccountId}:role/x-${AWS::Region}"),
            "arn:aws:iam::123456789012:role/x-us-east-1"
        );
        let cn = p.in_region(Some("cn-north-1"));
        assert_eq!(
            cn.substitute("${AWS::Partition}/${AWS::Region}/${Other}"),
            "aws-cn/cn-north-1/${Other}"
        );
        assert_eq!(p.in_region(None), p);
        assert_eq!(crate::partition::partition("us-gov-west-1"), "aws-us-gov");
    }
}
