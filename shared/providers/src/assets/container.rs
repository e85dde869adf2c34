//! Container image assets: built, tagged and pushed to their ECR destination with a
//! container engine's command line (`docker`, `podman`, `finch`, or the program
//! `STACKFLOW_CONTAINER_CLI` names). Without one, a stack with image assets is refused
//! before anything is written to AWS, naming each image and what is needed.
//!
//! The engine must already be able to push to the registry (an ECR credential helper, or
//! `aws ecr get-login-password | docker login ...`): stackflow does not log it in.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use stackflow_core::assets::{AssetManifest, Placeholders};

/// The environment variable naming the container engine's command line.
pub const CONTAINER_CLI_ENV: &str = "STACKFLOW_CONTAINER_CLI";

/// The programs looked for on `PATH` when [`CONTAINER_CLI_ENV`] is not set, in order.
pub const KNOWN_ENGINES: &[&str] = &["docker", "podman", "finch"];

/// The container engine to use: [`CONTAINER_CLI_ENV`], else `CDK_DOCKER` (the CDK's own
/// setting), else the first of [`KNOWN_ENGINES`] that `on_path` finds.
pub fn container_cli(
    env: impl Fn(&str) -> Option<String>,
    on_path: impl Fn(&str) -> bool,
) -> Option<String> {
    [CONTAINER_CLI_ENV, "CDK_DOCKER"]
        .iter()
        .find_map(|k| env(k).filter(|v| !v.trim().is_empty()))
        .or_else(|| {
            KNOWN_ENGINES
                .iter()
                .find(|p| on_path(p))
                .map(|p| p.to_string())
        })
}

/// [`container_cli`] from this process's environment and `PATH`.
pub fn container_cli_here() -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    container_cli(
        |k| std::env::var(k).ok(),
        |program| std::env::split_paths(&path).any(|dir| is_program(&dir.join(program))),
    )
}

fn is_program(file: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(file).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        file.is_file()
    }
}

/// One image to build and push to one destination, placeholders substituted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageJob {
    /// The asset's id.
    pub id: String,
    /// The asset, as the CDK names it.
    pub asset: String,
    /// The build context (`None` for an image made by a command).
    pub directory: Option<PathBuf>,
    /// The Dockerfile, relative to the directory.
    pub dockerfile: Option<String>,
    /// Build arguments.
    pub build_args: IndexMap<String, String>,
    /// The build target stage.
    pub target: Option<String>,
    /// The platform (`linux/arm64`).
    pub platform: Option<String>,
    /// The build's network mode.
    pub network_mode: Option<String>,
    /// The registry host: `<account>.dkr.ecr.<region>.<domain>`.
    pub registry: String,
    /// The repository.
    pub repository: String,
    /// The image tag.
    pub tag: String,
}

impl ImageJob {
    /// The image's URI in its registry.
    pub fn uri(&self) -> String {
        format!("{}/{}:{}", self.registry, self.repository, self.tag)
    }

    /// The tag the image gets locally before it is pushed.
    pub fn local_tag(&self) -> String {
        format!("cdkasset-{}", self.id.to_ascii_lowercase())
    }
}

/// The images of `manifest`, one job per destination.
pub fn image_jobs(manifest: &AssetManifest, at: &Placeholders) -> Vec<ImageJob> {
    let mut out = Vec::new();
    for image in &manifest.images {
        for d in &image.destinations {
            let here = at.in_region(d.region.as_deref());
            let domain = if here.region.starts_with("cn-") {
                "amazonaws.com.cn"
            } else {
                "amazonaws.com"
            };
            out.push(ImageJob {
                id: image.id.clone(),
                asset: image.display_name.clone(),
                directory: image.directory.clone(),
                dockerfile: image.dockerfile.clone(),
                build_args: image.build_args.clone(),
                target: image.target.clone(),
                platform: image.platform.clone(),
                network_mode: image.network_mode.clone(),
                registry: format!("{}.dkr.ecr.{}.{domain}", here.account_id, here.region),
                repository: here.substitute(&d.repository_name),
                tag: here.substitute(&d.image_tag),
            });
        }
    }
    out
}

/// Why an image cannot be published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageProblem {
    #[error(
        "container image asset {asset} ({uri}) is made by a command (`source.executable`), \
         which stackflow does not run"
    )]
    MadeByCommand { asset: String, uri: String },
    #[error(
        "container image asset {asset} needs a container engine to build it and push it to \
         {uri}: install docker (or podman, finch), or set {CONTAINER_CLI_ENV} to its command"
    )]
    NoEngine { asset: String, uri: String },
}

/// Why images were not published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// Some cannot be (found before anything is written): each, one a line.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Cannot(Vec<ImageProblem>),
    /// A command could not be started.
    #[error("container image asset {asset}: {program}: {message}")]
    NotStarted {
        asset: String,
        program: String,
        message: String,
    },
    /// A command failed.
    #[error("container image asset {asset}: `{command}` failed ({status})")]
    Failed {
        asset: String,
        command: String,
        status: String,
    },
}

/// Fails, before anything is written to AWS, when images are to be published and
/// cannot be: no container engine (`cli` is `None`), or an image made by a command.
/// The error names every such image and what it needs.
pub fn check_images(jobs: &[ImageJob], cli: Option<&str>) -> Result<(), ImageError> {
    let mut problems = Vec::new();
    for job in jobs {
        let (asset, uri) = (job.asset.clone(), job.uri());
        if job.directory.is_none() {
            problems.push(ImageProblem::MadeByCommand { asset, uri });
        } else if cli.is_none() {
            problems.push(ImageProblem::NoEngine { asset, uri });
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ImageError::Cannot(problems))
    }
}

/// The command lines that publish `job` with the engine `cli`: build, tag, push.
pub fn commands(cli: &str, job: &ImageJob) -> Vec<Vec<String>> {
    let mut build: Vec<String> = vec![cli.into(), "build".into()];
    let mut flag = |name: &str, value: &str| {
        build.push(name.to_string());
        build.push(value.to_string());
    };
    flag("--tag", &job.local_tag());
    if let Some(f) = &job.dockerfile {
        flag("--file", f);
    }
    if let Some(t) = &job.target {
        flag("--target", t);
    }
    if let Some(p) = &job.platform {
        flag("--platform", p);
    }
    if let Some(n) = &job.network_mode {
        flag("--network", n);
    }
    for (k, v) in &job.build_args {
        flag("--build-arg", &format!("{k}={v}"));
    }
    build.push(".".into());
    vec![
        build,
        vec![cli.into(), "tag".into(), job.local_tag(), job.uri()],
        vec![cli.into(), "push".into(), job.uri()],
    ]
}

/// Builds and pushes every image with `cli`, one after the other (builds share the
/// engine's cache). Returns how many were pushed.
pub async fn publish_images(cli: &str, jobs: &[ImageJob]) -> Result<usize, ImageError> {
    check_images(jobs, Some(cli))?;
    for job in jobs {
        let dir = job.directory.clone().unwrap_or_default();
        for line in commands(cli, job) {
            let status = tokio::process::Command::new(&line[0])
                .args(&line[1..])
                .current_dir(&dir)
                .stdin(std::process::Stdio::null())
                .status()
                .await
                .map_err(|e| ImageError::NotStarted {
                    asset: job.asset.clone(),
                    program: line[0].clone(),
                    message: e.to_string(),
                })?;
            if !status.success() {
                return Err(ImageError::Failed {
                    asset: job.asset.clone(),
                    command: line.join(" "),
                    status: status.to_string(),
                });
            }
        }
    }
    Ok(jobs.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stackflow_core::assets::parse_asset_manifest;

    fn jobs() -> Vec<ImageJob> {
        let m = parse_asset_manifest(
            &serde_json::json!({"dockerImages": {"ABC123": {
                "displayName": "Service/Image",
                "source": {"directory": "asset.abc", "dockerFile": "Dockerfile.prod",
                           "dockerBuildArgs": {"NODE": "20"}, "dockerBuildTarget": "run",
                           "platform": "linux/arm64"},
                "destinations": {"d": {
                    "repositoryName": "cdk-hnb659fds-container-assets-${AWS::AccountId}-${AWS::Region}",
                    "imageTag": "abc123"}}}}}),
            Path::new("/out"),
        )
        .unwrap();
        image_jobs(
            &m,
            &Placeholders {
                account_id: "123456789012".into(),
                region: "eu-west-1".into(),
            },
        )
    }

    #[test]
    fn the_engine_comes_from_the_setting_then_the_path() {
        let env = |k: &str| (k == CONTAINER_CLI_ENV).then(|| "/opt/nerdctl".to_string());
        assert_eq!(
            container_cli(env, |_| true).as_deref(),
            Some("/opt/nerdctl")
        );
        let cdk = |k: &str| (k == "CDK_DOCKER").then(|| "finch".to_string());
        assert_eq!(container_cli(cdk, |_| false).as_deref(), Some("finch"));
        let none = |_: &str| None;
        assert_eq!(
            container_cli(none, |p| p == "podman").as_deref(),
            Some("podman")
        );
        assert_eq!(container_cli(none, |_| false), None);
    }

    #[test]
    fn the_command_lines_build_tag_and_push_to_the_destination() {
        let job = &jobs()[0];
        let uri = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/\
                   cdk-hnb659fds-container-assets-123456789012-eu-west-1:abc123";
        assert_eq!(job.uri(), uri);
        let lines: Vec<String> = commands("docker", job)
            .iter()
            .map(|l| l.join(" "))
            .collect();
        assert_eq!(
            lines,
            [
                "docker build --tag cdkasset-abc123 --file Dockerfile.prod --target run \
                 --platform linux/arm64 --build-arg NODE=20 ."
                    .to_string(),
                format!("docker tag cdkasset-abc123 {uri}"),
                format!("docker push {uri}"),
            ]
        );
    }

    #[test]
    fn without_an_engine_each_image_is_named_with_what_it_needs() {
        let e = check_images(&jobs(), None).unwrap_err().to_string();
        assert!(e.contains("Service/Image"), "{e}");
        assert!(e.contains(CONTAINER_CLI_ENV) && e.contains("docker"), "{e}");
        assert!(check_images(&jobs(), Some("docker")).is_ok());
        assert!(check_images(&[], None).is_ok());
        let mut made = jobs();
        made[0].directory = None;
        let e = check_images(&made, Some("docker")).unwrap_err();
        assert!(
            matches!(&e, ImageError::Cannot(p) if matches!(p[..], [ImageProblem::MadeByCommand { .. }])),
            "{e}"
        );
        assert!(e.to_string().contains("source.executable"), "{e}");
    }
}
