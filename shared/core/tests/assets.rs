//! The asset manifests of the corpus's cloud assemblies: found from `manifest.json`,
//! parsed, and their references pointed at stackflow's bucket.

use std::path::PathBuf;

use stackflow_core::assets::{
    Packaging, Placeholders, Retarget, STACKFLOW_BUCKET_PATTERN, load_asset_manifest,
};
use stackflow_core::template::load_path;

fn case(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/corpus")
        .join(name)
}

fn here() -> Placeholders {
    Placeholders {
        account_id: "123456789012".into(),
        region: "us-east-1".into(),
    }
}

#[test]
fn every_corpus_stack_names_its_asset_manifest() {
    for name in [
        "nested-stack",
        "custom-resource-provider",
        "cross-stack-export-import",
    ] {
        for stack in load_path(&case(name)).unwrap() {
            let file = stack
                .assets
                .clone()
                .unwrap_or_else(|| panic!("{name}: none"));
            assert_eq!(
                file.file_name().unwrap().to_string_lossy(),
                format!("{}.assets.json", stack.name)
            );
            load_asset_manifest(&file).unwrap();
        }
    }
}

#[test]
fn directories_are_zipped_and_templates_are_files() {
    let stack = load_path(&case("custom-resource-provider"))
        .unwrap()
        .remove(0);
    let m = load_asset_manifest(stack.assets.as_ref().unwrap()).unwrap();
    let zips: Vec<_> = m
        .files
        .iter()
        .filter(|f| f.packaging == Packaging::ZipDirectory)
        .collect();
    assert_eq!(zips.len(), 2);
    assert!(zips.iter().all(|f| f.path.is_dir()));
    let template = m
        .files
        .iter()
        .find(|f| f.packaging == Packaging::File)
        .unwrap();
    assert!(
        template
            .path
            .ends_with("CustomResourceProviderStack.template.json")
    );
    assert!(m.images.is_empty());
}

#[test]
fn a_nested_stacks_template_url_and_lambda_code_are_retargeted() {
    let mut nested = load_path(&case("nested-stack")).unwrap().remove(0);
    let m = load_asset_manifest(nested.assets.as_ref().unwrap()).unwrap();
    let r = Retarget::for_manifests([&m], &here());
    let changed = r.stack(&mut nested);
    assert!(
        changed.iter().any(|c| c.ends_with(".TemplateURL")),
        "{changed:?}"
    );
    let text = serde_json::to_string(&nested.template.resources).unwrap();
    assert!(!text.contains("cdk-hnb659fds-assets"), "{text}");
    assert!(text.contains(STACKFLOW_BUCKET_PATTERN));

    let mut provider = load_path(&case("custom-resource-provider"))
        .unwrap()
        .remove(0);
    let m = load_asset_manifest(provider.assets.as_ref().unwrap()).unwrap();
    let changed = Retarget::for_manifests([&m], &here()).stack(&mut provider);
    let code: Vec<_> = changed.iter().filter(|c| c.ends_with(".Code")).collect();
    assert_eq!(code.len(), 5, "{changed:?}");
    let text = serde_json::to_string(&provider.template.resources).unwrap();
    assert!(!text.contains("cdk-hnb659fds-assets"));
    assert!(
        text.contains(
            "assets/5c9fd00ba20b9f0f8161f2bd2ccae0f9c29df2b76d34155b8bf281abc354adc8.zip"
        )
    );
}
