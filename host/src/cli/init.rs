//! `host init NAME --lang rust|python|js`: a new connector project that builds with the command
//! its README gives and passes `host test` against the demo API as written. The project carries
//! the SDK of its language and the WIT contract (embedded in the host at build time), so it
//! builds anywhere the language's component tool is installed, without this repository.

use anyhow::{Context, Result, bail};
use include_dir::{Dir, include_dir};
use std::path::{Path, PathBuf};

static WIT: Dir = include_dir!("$CARGO_MANIFEST_DIR/../wit");
static RUST_SDK: Dir = include_dir!("$CARGO_MANIFEST_DIR/../guest-sdk/src");
static PYTHON_SDK: Dir = include_dir!("$CARGO_MANIFEST_DIR/../guest-sdk/python/sluice_guest");
static JS_SDK: Dir = include_dir!("$CARGO_MANIFEST_DIR/../guest-sdk/js/src");
static TEMPLATES: Dir = include_dir!("$CARGO_MANIFEST_DIR/templates/init");
/// Where the JavaScript tools' pinned versions are.
const JS_PACKAGE: &str = include_str!("../../../guest-sdk/js/package.json");

/// The language of a new connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

impl Lang {
    fn dir(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }
}

/// Writes the project `name` in `lang` into `dir` (which must not exist, or be empty) and
/// returns the files written, relative to it.
pub fn write(name: &str, lang: Lang, dir: &Path) -> Result<Vec<PathBuf>> {
    check_name(name)?;
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
        if entries.next().is_some() {
            bail!("{} exists and is not empty: nothing was written (choose another --dir)", dir.display());
        }
    }
    let vars = Vars::new(name)?;
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    // The project's own files, from the language's templates.
    let templates = TEMPLATES.get_dir(lang.dir()).expect("a template per language");
    for file in all_files(templates) {
        let relative = file.path().strip_prefix(lang.dir()).expect("under the language's folder");
        let text = vars.fill(file.contents_utf8().expect("templates are text"));
        let to = match relative.to_str() {
            Some("sdk-Cargo.toml") => PathBuf::from("sluice/guest-sdk/Cargo.toml"),
            _ => relative.to_path_buf(),
        };
        files.push((to, text.into_bytes()));
    }
    // The SDK and the contract, as this host was built with them.
    let (sdk, under) = match lang {
        Lang::Rust => (&RUST_SDK, "sluice/guest-sdk/src"),
        Lang::Python => (&PYTHON_SDK, "sluice/python/sluice_guest"),
        Lang::Js => (&JS_SDK, "sluice/js/src"),
    };
    for file in all_files(sdk) {
        files.push((Path::new(under).join(file.path()), file.contents().to_vec()));
    }
    // The current contract only: the frozen earlier versions (wit/since_v*/) are the host's.
    for file in WIT.files() {
        files.push((Path::new("sluice/wit").join(file.path()), file.contents().to_vec()));
    }
    files.push(("config.json".into(), b"{\"base_url\": \"http://127.0.0.1:8080\"}\n".to_vec()));
    files.push((".gitignore".into(), b"/target/\n/node_modules/\n__pycache__/\n*.wasm\n".to_vec()));
    for (path, contents) in &files {
        let to = dir.join(path);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&to, contents).with_context(|| format!("cannot write {}", to.display()))?;
    }
    let mut written: Vec<PathBuf> = files.into_iter().map(|(p, _)| p).collect();
    written.sort();
    Ok(written)
}

/// The name becomes a package name (Cargo, npm) and the component's file name.
fn check_name(name: &str) -> Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        bail!(
            "{name:?} cannot name a connector: start with a lowercase letter, then use only a-z, 0-9, - and _ \
             (at most 64 characters); it names the package and the .wasm"
        );
    }
    Ok(())
}

/// Every file below `dir`, at any depth; Python's bytecode caches left out.
fn all_files<'a>(dir: &'a Dir<'a>) -> Vec<&'a include_dir::File<'a>> {
    let mut out = Vec::new();
    for entry in dir.entries() {
        match entry {
            include_dir::DirEntry::Dir(d) if d.path().file_name().is_some_and(|n| n == "__pycache__") => {}
            include_dir::DirEntry::Dir(d) => out.extend(all_files(d)),
            include_dir::DirEntry::File(f) => out.push(f),
        }
    }
    out
}

/// What the templates' `{{...}}` stand for.
struct Vars {
    pairs: Vec<(&'static str, String)>,
}

impl Vars {
    fn new(name: &str) -> Result<Vars> {
        let package: serde_json::Value = serde_json::from_str(JS_PACKAGE).context("guest-sdk/js/package.json")?;
        let componentize_js = package["devDependencies"]["@bytecodealliance/componentize-js"]
            .as_str()
            .context("guest-sdk/js/package.json pins no componentize-js")?
            .to_string();
        Ok(Vars {
            pairs: vec![
                ("{{name}}", name.to_string()),
                // Cargo names the component after the crate, with `_` for `-`.
                ("{{crate}}", name.replace('-', "_")),
                ("{{sluice_version}}", env!("CARGO_PKG_VERSION").to_string()),
                ("{{componentize_js_version}}", componentize_js),
            ],
        })
    }

    fn fill(&self, template: &str) -> String {
        let mut text = template.to_string();
        for (key, value) in &self.pairs {
            text = text.replace(key, value);
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_cannot_name_a_package_are_refused() {
        for bad in ["", "Source", "1source", "my source", "../x", "a/b", "caf\u{e9}", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["a", "my-source", "source_2"] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn every_placeholder_is_filled() {
        let dir = tempfile::tempdir().unwrap();
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let to = dir.path().join(lang.dir());
            let files = write("my-source", lang, &to).unwrap();
            assert!(files.contains(&PathBuf::from("sluice/wit/connector.wit")), "{files:?}");
            assert!(files.contains(&PathBuf::from("README.md")), "{files:?}");
            for file in &files {
                let text = std::fs::read_to_string(to.join(file)).unwrap();
                assert!(!text.contains("{{name}}") && !text.contains("{{crate}}"), "{}", file.display());
            }
            assert!(!files.iter().any(|f| f.to_string_lossy().contains("__pycache__")), "{files:?}");
        }
        let readme = std::fs::read_to_string(dir.path().join("rust/README.md")).unwrap();
        assert!(readme.contains("target/wasm32-wasip2/release/my_source.wasm"), "{readme}");
    }

    #[test]
    fn a_directory_with_files_in_it_is_not_written_to() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let error = write("x", Lang::Python, dir.path()).unwrap_err().to_string();
        assert!(error.contains("exists and is not empty: nothing was written"), "{error}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert_eq!(std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(), "mine");
    }

    /// The vendored SDK's manifest names the SDK's dependencies at the versions the workspace
    /// pins: a dependency added to guest-sdk/Cargo.toml and not here would break every project
    /// `host init` writes.
    #[test]
    fn the_vendored_sdk_has_the_sdks_dependencies() {
        let vendored = TEMPLATES.get_file("rust/sdk-Cargo.toml").unwrap().contents_utf8().unwrap();
        let sdk = include_str!("../../../guest-sdk/Cargo.toml");
        let workspace = include_str!("../../../Cargo.toml");
        let deps = |text: &str| -> Vec<String> {
            let section = text.split("[dependencies]").nth(1).unwrap_or_default();
            let section = section.split("\n[").next().unwrap_or_default();
            section
                .lines()
                .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().split('.').next().unwrap().to_string()))
                .filter(|k| !k.is_empty() && !k.starts_with('#'))
                .collect()
        };
        assert_eq!(deps(vendored), deps(sdk));
        let pinned = workspace.lines().find(|l| l.starts_with("wit-bindgen")).unwrap();
        assert!(vendored.lines().any(|l| l == pinned), "wit-bindgen as the workspace pins it: {pinned}");
    }
}
