//! Issue 23 item 4: every path a cloud assembly names resolves inside it, symbolic links
//! included, or the assembly is refused naming the path: a stack's `templateFile`, an
//! asset manifest's `file` and its assets' sources, a nested assembly's
//! `directoryName`, a nested stack's `aws:asset:path`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use stackflow_core::template::load_path;

/// A fresh directory holding `cdk.out/` and, beside it, a file no deploy may read.
fn workspace(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("confinement")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("cdk.out")).unwrap();
    std::fs::write(dir.join("secret.txt"), "not for upload").unwrap();
    std::fs::write(
        dir.join("outside.template.json"),
        r#"{"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}"#,
    )
    .unwrap();
    dir
}

fn write(path: &Path, v: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// A manifest with one stack `App` whose template is `template_file`, and an asset
/// manifest `App.assets.json` with one file asset whose source is `asset_path`.
fn assembly(out: &Path, template_file: &str, asset_path: &str) {
    write(
        &out.join("manifest.json"),
        &json!({
            "version": "36.0.0",
            "artifacts": {
                "App.assets": {"type": "cdk:asset-manifest",
                    "properties": {"file": "App.assets.json"}},
                "App": {"type": "aws:cloudformation:stack",
                    "properties": {"templateFile": template_file},
                    "dependencies": ["App.assets"]}
            }
        }),
    );
    write(
        &out.join("App.template.json"),
        &json!({"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}),
    );
    write(
        &out.join("App.assets.json"),
        &json!({"version": "36.0.0", "files": {"abc": {
            "source": {"path": asset_path, "packaging": "file"},
            "destinations": {"d": {"bucketName": "b", "objectKey": "abc.json"}}
        }}}),
    );
    std::fs::write(out.join("asset.abc.json"), "{}").unwrap();
}

fn refused(out: &Path, names: &str) -> String {
    let e = load_path(out).expect_err("refused").to_string();
    assert!(e.contains(names), "names {names}: {e}");
    e
}

#[test]
fn an_assembly_whose_paths_stay_inside_loads() {
    let dir = workspace("inside");
    let out = dir.join("cdk.out");
    assembly(&out, "App.template.json", "asset.abc.json");
    let stacks = load_path(&out).unwrap();
    assert_eq!(stacks[0].name, "App");
}

#[test]
fn a_template_file_outside_the_assembly_is_refused() {
    let dir = workspace("template");
    let out = dir.join("cdk.out");
    assembly(&out, "../outside.template.json", "asset.abc.json");
    let e = refused(&out, "outside.template.json");
    assert!(e.contains("outside the cloud assembly"), "{e}");
    let absolute = dir.join("outside.template.json").display().to_string();
    assembly(&out, &absolute, "asset.abc.json");
    assert!(refused(&out, "outside.template.json").contains("absolute"));
}

#[test]
fn an_asset_source_outside_the_assembly_is_refused() {
    let dir = workspace("asset");
    let out = dir.join("cdk.out");
    assembly(&out, "App.template.json", "../secret.txt");
    let e = refused(&out, "secret.txt");
    assert!(e.contains("asset `abc`"), "{e}");
    let absolute = dir.join("secret.txt").display().to_string();
    assembly(&out, "App.template.json", &absolute);
    refused(&out, "secret.txt");
}

#[cfg(unix)]
#[test]
fn symbolic_links_out_of_the_assembly_are_refused() {
    use std::os::unix::fs::symlink;
    let dir = workspace("links");
    let out = dir.join("cdk.out");
    assembly(&out, "Link.template.json", "asset.abc.json");
    symlink(
        dir.join("outside.template.json"),
        out.join("Link.template.json"),
    )
    .unwrap();
    refused(&out, "outside.template.json");
    assembly(&out, "App.template.json", "asset.link");
    symlink(dir.join("secret.txt"), out.join("asset.link")).unwrap();
    refused(&out, "secret.txt");
    // A link inside a directory that is zipped.
    write(
        &out.join("App.assets.json"),
        &json!({"version": "36.0.0", "files": {"dir": {
            "source": {"path": "asset.dir", "packaging": "zip"},
            "destinations": {"d": {"bucketName": "b", "objectKey": "dir.zip"}}
        }}}),
    );
    std::fs::create_dir_all(out.join("asset.dir/lib")).unwrap();
    symlink(dir.join("secret.txt"), out.join("asset.dir/lib/key")).unwrap();
    let e = refused(&out, "secret.txt");
    assert!(e.contains("asset `dir`"), "{e}");
    std::fs::remove_file(out.join("asset.dir/lib/key")).unwrap();
    symlink(out.join("asset.dir"), out.join("asset.dir/lib/up")).unwrap();
    assert!(load_path(&out).is_ok(), "a link back up is left to the zip");
    // A link to a file inside is followed as before.
    assembly(&out, "App.template.json", "asset.same");
    symlink(out.join("asset.abc.json"), out.join("asset.same")).unwrap();
    assert!(load_path(&out).is_ok());
}

#[test]
fn a_nested_assembly_or_nested_stack_outside_is_refused() {
    let dir = workspace("nested");
    let out = dir.join("cdk.out");
    write(
        &out.join("manifest.json"),
        &json!({"version": "36.0.0", "artifacts": {"Stage": {"type": "cdk:cloud-assembly",
            "properties": {"directoryName": "../elsewhere"}}}}),
    );
    std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
    refused(&out, "elsewhere");

    assembly(&out, "App.template.json", "asset.abc.json");
    write(
        &out.join("App.template.json"),
        &json!({"Resources": {"Child": {"Type": "AWS::CloudFormation::Stack",
            "Properties": {"TemplateURL": "https://example.com/child.json"},
            "Metadata": {"aws:asset:path": "../outside.template.json"}}}}),
    );
    let e = refused(&out, "outside.template.json");
    assert!(e.contains("aws:asset:path"), "{e}");
}
