//! Lambda code for the tests: zip packages (made with `python3`'s `zipfile`, which keeps
//! file modes, so a `bootstrap` stays executable), functions created on the emulator, and
//! the engine's own bootstrap built for this host. The functions run through the
//! container stand-in a started emulator is given (see [`crate::emulator`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::{Architecture, Environment, FunctionCode, Runtime};

use crate::emulator::unique_name;

/// Zips `dir`'s files (recursively, paths relative to `dir`, modes kept).
pub fn zip_dir(dir: &Path) -> Vec<u8> {
    const SCRIPT: &str = r#"
import os, sys, zipfile
root, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for base, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(base, name)
            z.write(path, os.path.relpath(path, root))
"#;
    let out = std::env::temp_dir().join(format!("{}.zip", unique_name("zip")));
    let status = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(dir)
        .arg(&out)
        .status()
        .expect("python3 runs (it zips Lambda code for the tests)");
    assert!(status.success(), "zipping {} failed", dir.display());
    let bytes = std::fs::read(&out).expect("the zip");
    let _ = std::fs::remove_file(&out);
    bytes
}

/// Zips `files` (name, content), each executable.
pub fn zip_files(files: &[(&str, &[u8])]) -> Vec<u8> {
    let dir = std::env::temp_dir().join(unique_name("zipsrc"));
    for (name, content) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        make_executable(&path);
    }
    let zip = zip_dir(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    zip
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// What a test function is made of.
#[derive(Debug, Clone)]
pub struct FunctionSpec<'a> {
    pub name: &'a str,
    pub runtime: Runtime,
    pub handler: &'a str,
    pub zip: Vec<u8>,
    pub timeout: i32,
    pub env: Vec<(String, String)>,
    /// `Architectures` (Lambda's default, x86_64, when `None`).
    pub architecture: Option<Architecture>,
}

/// Creates `spec` on the emulator; its ARN.
pub async fn create_function(lambda: &aws_sdk_lambda::Client, spec: FunctionSpec<'_>) -> String {
    let mut env = Environment::builder();
    for (k, v) in spec.env {
        env = env.variables(k, v);
    }
    lambda
        .create_function()
        .function_name(spec.name)
        .runtime(spec.runtime)
        .handler(spec.handler)
        .role("arn:aws:iam::123456789012:role/stackflow-test-lambda")
        .timeout(spec.timeout)
        .set_architectures(spec.architecture.map(|a| vec![a]))
        .environment(env.build())
        .code(
            FunctionCode::builder()
                .zip_file(Blob::new(spec.zip))
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "CreateFunction {}: {}",
                spec.name,
                aws_sdk_lambda::error::DisplayErrorContext(e)
            )
        })
        .function_arn
        .expect("a function ARN")
}

/// The engine's Lambda bootstrap (`functions/bootstrap`, crate `stackflow-fn-bootstrap`)
/// built for this host with the test profile's settings (`STACKFLOW_BOOTSTRAP_BIN`, else
/// `cargo build` once per test binary; cargo's lock waits for any other build of the
/// workspace), as the zip a `provided.al2023` function deploys: `bootstrap` at its root.
///
/// The stand-in runs a function's `bootstrap` as a process of this machine, so the zip
/// holds a launcher of the built executable (a small x86_64 program, compiled here with
/// `cc`, that `exec`s it), not the executable: a function made from it is ~16 KB for the
/// emulator to unpack and copy instead of ~30 MB zipped (108 MB without debug
/// information), which made an engine install's eleven `CreateFunction` calls take
/// minutes on 2 cores, past the CLI's 30 s attempt timeout. What runs is the same
/// executable. Without `cc`, or for a bootstrap built for another architecture, the zip
/// holds the executable (without its debug information where `strip` can take it off).
/// (The arm64 artifact's own test, in `stepfunctions_lambda.rs`, deploys the real zip.)
pub fn engine_bootstrap_zip() -> &'static [u8] {
    static ZIP: OnceLock<Vec<u8>> = OnceLock::new();
    ZIP.get_or_init(|| {
        let binary = engine_bootstrap_bin();
        // A bootstrap built for another machine (the arm64 artifact, stripped already,
        // which the stand-in runs under qemu by its ELF header) is zipped as it is.
        let bytes = if !built_for_this_machine(binary) {
            std::fs::read(binary).expect("the built bootstrap")
        } else {
            launcher(binary).unwrap_or_else(|| stripped(binary))
        };
        zip_files(&[("bootstrap", &bytes)])
    })
}

/// The Lambda architecture of the engine's bootstrap ([`engine_bootstrap_zip`]'s):
/// `arm64` for an aarch64 executable (the artifact `.ci/build-arm64` makes, given as
/// `STACKFLOW_BOOTSTRAP_BIN`), else `x86_64`.
pub fn engine_bootstrap_arch() -> &'static str {
    match elf_machine(engine_bootstrap_bin()) {
        Some(AARCH64) => "arm64",
        _ => "x86_64",
    }
}

/// ELF's machine numbers of aarch64 and x86_64.
const AARCH64: u16 = 183;
const X86_64: u16 = 62;

/// The machine an ELF executable at `path` is built for (its header's), if it is one.
fn elf_machine(path: &Path) -> Option<u16> {
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| {
            use std::io::Read as _;
            f.read_exact(&mut header)
        })
        .ok()?;
    header
        .starts_with(b"\x7fELF")
        .then(|| u16::from_le_bytes([header[18], header[19]]))
}

/// Whether the executable at `path` is built for this machine's architecture (its ELF
/// header's machine).
fn built_for_this_machine(path: &Path) -> bool {
    let here = if cfg!(target_arch = "aarch64") {
        AARCH64
    } else {
        X86_64
    };
    elf_machine(path) == Some(here)
}

/// A program that runs `binary` with its own arguments and environment, compiled with
/// `cc`; `None` without a C compiler.
fn launcher(binary: &Path) -> Option<Vec<u8>> {
    let path = binary.display().to_string();
    assert!(
        !path.contains(['"', '\\']),
        "a bootstrap path without quotes or backslashes: {path}"
    );
    let dir = std::env::temp_dir().join(unique_name("launcher"));
    std::fs::create_dir_all(&dir).ok()?;
    let source = dir.join("launcher.c");
    std::fs::write(
        &source,
        format!(
            "#include <unistd.h>\nint main(int argc, char **argv) {{\n  (void)argc;\n  \
             argv[0] = \"{path}\";\n  execv(argv[0], argv);\n  return 127;\n}}\n"
        ),
    )
    .ok()?;
    let out = dir.join("launcher");
    let built = Command::new("cc")
        .arg("-O2")
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .status();
    let bytes = match built {
        Ok(s) if s.success() => std::fs::read(&out).ok(),
        _ => None,
    };
    let _ = std::fs::remove_dir_all(&dir);
    bytes
}

/// `binary` without its debug information where `strip` exists (108 MB of 187 MB).
fn stripped(binary: &Path) -> Vec<u8> {
    let stripped = std::env::temp_dir().join(unique_name("bootstrap"));
    let strip = Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(binary)
        .status();
    let source = match strip {
        Ok(s) if s.success() => stripped.clone(),
        _ => binary.to_path_buf(),
    };
    let bytes = std::fs::read(&source).expect("the built bootstrap");
    let _ = std::fs::remove_file(&stripped);
    bytes
}

/// The bootstrap executable to use instead of building one (`.ci/test` sets it to the one
/// `cargo test --workspace` built: a `cargo build -p` of the one package resolves other
/// features and compiles its dependencies again, for minutes, in the middle of a test).
pub const BOOTSTRAP_ENV: &str = "STACKFLOW_BOOTSTRAP_BIN";

/// [`build_engine_bootstrap`]'s answer, once per test binary.
fn engine_bootstrap_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build_engine_bootstrap)
}

fn build_engine_bootstrap() -> PathBuf {
    if let Some(path) = std::env::var_os(BOOTSTRAP_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{BOOTSTRAP_ENV}={} is not a file",
            path.display()
        );
        return path;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new(cargo)
        .current_dir(workspace)
        .args([
            "build",
            "--locked",
            "-p",
            "stackflow-fn-bootstrap",
            "--message-format=json-render-diagnostics",
        ])
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build -p stackflow-fn-bootstrap failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| {
            m["reason"] == "compiler-artifact" && m["target"]["name"] == "stackflow-fn-bootstrap"
        })
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo reports the bootstrap's executable")
}

/// A proxy in front of the emulator whose `CreateFunction` takes code from S3: fakecloud
/// 0.51.0 keeps no code for a function created with `Code.S3Bucket`/`S3Key` (only its
/// `UpdateFunctionCode` reads the object), so such a function cannot be invoked. The proxy
/// reads the object and sends the request with the bytes as `Code.ZipFile`, as Lambda
/// itself copies the object at create time; every other request passes unchanged (one
/// upstream connection each).
///
/// The object is read once for all the functions made from it (by its ETag), and a read
/// that fails is tried again. When it cannot be read at all, the request is not sent: the
/// client's connection is closed, and its SDK sends the request again. (Sent as it was, it
/// would make a function without code, which fails only when it is invoked.)
#[derive(Debug)]
pub struct InlineS3Code {
    addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for InlineS3Code {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The code objects read, by bucket, key and ETag.
type CodeObjects = std::sync::Arc<
    tokio::sync::Mutex<
        std::collections::HashMap<(String, String, String), std::sync::Arc<Vec<u8>>>,
    >,
>;

impl InlineS3Code {
    /// Listens on `127.0.0.1:0` in front of `emulator`.
    pub async fn start(emulator: &crate::Emulator) -> InlineS3Code {
        let upstream = crate::http1::upstream_addr(emulator.endpoint())
            .await
            .expect("the emulator's address");
        // Tens of megabytes from an emulator that may be busy: no operation timeout of two
        // minutes for these reads.
        let config = aws_sdk_s3::config::Builder::from(&emulator.sdk_config().await)
            .force_path_style(true)
            .timeout_config(
                aws_smithy_types::timeout::TimeoutConfig::builder()
                    .connect_timeout(std::time::Duration::from_secs(5))
                    .operation_timeout(std::time::Duration::from_secs(900))
                    .build(),
            )
            .build();
        let s3 = aws_sdk_s3::Client::from_conf(config);
        let objects = CodeObjects::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(inline_connection(
                    client,
                    upstream,
                    s3.clone(),
                    objects.clone(),
                ));
            }
        });
        InlineS3Code { addr, task }
    }

    /// The proxy's endpoint URL.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
}

async fn inline_connection(
    mut client: tokio::net::TcpStream,
    upstream: std::net::SocketAddr,
    s3: aws_sdk_s3::Client,
    objects: CodeObjects,
) {
    use tokio::io::AsyncWriteExt;
    let mut buf = Vec::new();
    while let Ok(Some((request, head))) = crate::http1::read_request(&mut client, &mut buf).await {
        let request = if head.method == "POST" && head.path == "/2015-03-31/functions" {
            match inline_code(request, &s3, &objects).await {
                Ok(request) => request,
                Err(why) => {
                    eprintln!(
                        "InlineS3Code: CreateFunction not sent, the connection closed: {why}"
                    );
                    return;
                }
            }
        } else {
            request
        };
        let Ok(answer) = crate::http1::forward(upstream, &request, &head.method).await else {
            return;
        };
        if client.write_all(&answer.bytes).await.is_err() || answer.close {
            return;
        }
    }
}

/// The bytes of `bucket`/`key`, read once for every request naming the same object
/// (its ETag), a failed read tried again (5 times in all).
async fn code_object(
    s3: &aws_sdk_s3::Client,
    objects: &CodeObjects,
    bucket: &str,
    key: &str,
) -> Result<std::sync::Arc<Vec<u8>>, String> {
    // One read at a time: the functions of an engine are made from one object.
    let mut objects = objects.lock().await;
    let mut why = String::new();
    for attempt in 1..=5u64 {
        if attempt > 1 {
            tokio::time::sleep(std::time::Duration::from_millis(500 * attempt)).await;
        }
        let object = match s3.get_object().bucket(bucket).key(key).send().await {
            Ok(o) => o,
            Err(e) => {
                why = format!(
                    "GetObject s3://{bucket}/{key}: {}",
                    aws_sdk_s3::error::DisplayErrorContext(&e)
                );
                continue;
            }
        };
        let id = (
            bucket.to_string(),
            key.to_string(),
            object.e_tag().unwrap_or_default().to_string(),
        );
        if let Some(bytes) = objects.get(&id) {
            return Ok(bytes.clone());
        }
        match object.body.collect().await {
            Ok(bytes) => {
                let bytes = std::sync::Arc::new(bytes.to_vec());
                objects.insert(id, bytes.clone());
                return Ok(bytes);
            }
            Err(e) => why = format!("reading s3://{bucket}/{key}: {e}"),
        }
    }
    Err(why)
}

/// A `CreateFunction` request with its S3 code inlined (unchanged when it has none); an
/// error when the object cannot be read.
async fn inline_code(
    request: Vec<u8>,
    s3: &aws_sdk_s3::Client,
    objects: &CodeObjects,
) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    let Some(end) = crate::http1::find(&request, b"\r\n\r\n") else {
        return Ok(request);
    };
    let Ok(mut body) = serde_json::from_slice::<serde_json::Value>(&request[end + 4..]) else {
        return Ok(request);
    };
    let code = &body["Code"];
    let (Some(bucket), Some(key)) = (code["S3Bucket"].as_str(), code["S3Key"].as_str()) else {
        return Ok(request);
    };
    let bytes = code_object(s3, objects, bucket, key).await?;
    let zip = base64::engine::general_purpose::STANDARD.encode(bytes.as_slice());
    body["Code"] = serde_json::json!({ "ZipFile": zip });
    let new_body = serde_json::to_vec(&body).unwrap();
    let head = String::from_utf8_lossy(&request[..end]);
    let mut out: Vec<String> = head
        .split("\r\n")
        .filter(|l| {
            let name = l
                .split(':')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            name != "content-length" && name != "x-amz-content-sha256"
        })
        .map(str::to_string)
        .collect();
    out.push(format!("Content-Length: {}", new_body.len()));
    let mut bytes = out.join("\r\n").into_bytes();
    bytes.extend_from_slice(b"\r\n\r\n");
    bytes.extend_from_slice(&new_body);
    Ok(bytes)
}
