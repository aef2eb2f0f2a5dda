//! Which release a bridge command runs, read from its install rather than from the profile, so a
//! run of another release than the profile describes says so: an npm package (the
//! `package.json` above the executable's real path, or `npx name@version`) or a Python venv (the
//! `.dist-info` whose console scripts name the executable).

use std::path::{Path, PathBuf};

/// `name version` of the package `command` runs, when its install shows it.
pub fn installed(command: &str) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().filter(|w| !is_assignment(w)).collect();
    let (first, rest) = words.split_first()?;
    if matches!(base(first), "npx" | "pnpx" | "bunx") {
        return rest.iter().find(|w| !w.starts_with('-')).and_then(|spec| npx_spec(spec));
    }
    // An interpreter runs the first argument that is not a flag.
    let program = match base(first) {
        "node" | "python" | "python3" => rest.iter().find(|w| !w.starts_with('-')).copied()?,
        _ => first,
    };
    let path = std::fs::canonicalize(locate(program)?).ok()?;
    npm_package(&path).or_else(|| venv_distribution(Path::new(program), &path))
}

/// `FOO=bar`, an environment assignment before the command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| !name.is_empty() && !name.contains('/') && !name.starts_with('-'))
}

fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `name@version` (or `@scope/name@version`) as npx takes it; a spec without a version is the
/// registry's latest, which the install does not show.
fn npx_spec(spec: &str) -> Option<String> {
    let at = spec.rfind('@').filter(|&at| at > 0)?;
    let (name, version) = (&spec[..at], &spec[at + 1..]);
    version.chars().next().is_some_and(|c| c.is_ascii_digit()).then(|| format!("{name} {version}"))
}

/// The file a program word names: a path as given, else the first match on `PATH`.
fn locate(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| p.is_file())
}

/// The nearest `package.json` with a name and a version above `file`, inside `node_modules`
/// (a `.bin` link resolves into its package), or the package a project's own script is in.
fn npm_package(file: &Path) -> Option<String> {
    file.ancestors().skip(1).find_map(|dir| {
        let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
        let json: serde_json::Value = serde_json::from_str(&text).ok()?;
        Some(format!("{} {}", json.get("name")?.as_str()?, json.get("version")?.as_str()?))
    })
}

/// A venv's console script (`venv/bin/NAME`): the distribution in `venv/lib/python*/site-packages`
/// whose `entry_points.txt` declares `NAME = ...`.
fn venv_distribution(word: &Path, file: &Path) -> Option<String> {
    let script = word.file_name()?.to_str()?;
    let venv = file.parent()?.parent()?;
    let lib = std::fs::read_dir(venv.join("lib")).ok()?;
    let mut infos: Vec<PathBuf> = lib
        .filter_map(|python| std::fs::read_dir(python.ok()?.path().join("site-packages")).ok())
        .flatten()
        .filter_map(|entry| Some(entry.ok()?.path()).filter(|p| p.extension().is_some_and(|e| e == "dist-info")))
        .collect();
    infos.sort();
    infos.into_iter().find_map(|info| {
        let entry_points = std::fs::read_to_string(info.join("entry_points.txt")).ok()?;
        entry_points.lines().any(|line| line.split('=').next().is_some_and(|name| name.trim() == script)).then_some(())?;
        let metadata = std::fs::read_to_string(info.join("METADATA")).ok()?;
        let field = |key: &str| metadata.lines().find_map(|line| line.strip_prefix(key).map(str::trim).map(str::to_string));
        Some(format!("{} {}", field("Name:")?, field("Version:")?))
    })
}

/// A note when the release run is not the one the profile was written for (`name version`
/// each): its design entries (deadline, retries, sessions) were read from another release's
/// source.
pub fn mismatch(profile_name: &str, installed: &str) -> Option<String> {
    let (profile_package, profile_version) = profile_name.rsplit_once(' ')?;
    let (package, version) = installed.rsplit_once(' ')?;
    (package == profile_package && version != profile_version).then(|| {
        format!(
            "note: the command runs {installed}, the profile describes {profile_name}: its design entries (deadline, retries, sessions) were read from that release's source, so a finding may be a difference of releases"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn reads_the_release_from_an_npm_install_a_venv_and_an_npx_spec() {
        let root = std::env::temp_dir().join(format!("harness-package-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // npm: node_modules/.bin/gw links to ../gw/dist/index.js, under gw's package.json.
        let package = root.join("npm/node_modules/gw");
        write(&package.join("package.json"), r#"{"name": "gw", "version": "3.0.1"}"#);
        write(&package.join("dist/index.js"), "#!/usr/bin/env node\n");
        std::fs::create_dir_all(root.join("npm/node_modules/.bin")).unwrap();
        std::os::unix::fs::symlink("../gw/dist/index.js", root.join("npm/node_modules/.bin/gw")).unwrap();
        let bin = root.join("npm/node_modules/.bin/gw");
        assert_eq!(installed(&format!("{} --sse {{url}}", bin.display())).as_deref(), Some("gw 3.0.1"));
        assert_eq!(installed(&format!("DEBUG=1 node {} {{url}}", package.join("dist/index.js").display())).as_deref(), Some("gw 3.0.1"));
        // A venv: bin/proxy, declared by proxy-0.11.0.dist-info's console scripts.
        let venv = root.join("venv");
        write(&venv.join("bin/proxy"), "#!/venv/bin/python\n");
        let info = venv.join("lib/python3.11/site-packages/proxy_tool-0.11.0.dist-info");
        write(&info.join("entry_points.txt"), "[console_scripts]\nproxy = proxy_tool.__main__:main\n");
        write(&info.join("METADATA"), "Metadata-Version: 2.4\nName: proxy-tool\nVersion: 0.11.0\n");
        let other = venv.join("lib/python3.11/site-packages/httpx-0.28.1.dist-info");
        write(&other.join("entry_points.txt"), "[console_scripts]\nhttpx = httpx:main\n");
        write(&other.join("METADATA"), "Name: httpx\nVersion: 0.28.1\n");
        assert_eq!(installed(&format!("{} --transport streamablehttp {{url}}", venv.join("bin/proxy").display())).as_deref(), Some("proxy-tool 0.11.0"));
        // npx names its release; without one, or for an unknown program, nothing is claimed.
        assert_eq!(installed("npx -y mcp-remote@0.1.29 {url}").as_deref(), Some("mcp-remote 0.1.29"));
        assert_eq!(installed("npx -y @scope/bridge@2.0.0 {url}").as_deref(), Some("@scope/bridge 2.0.0"));
        assert_eq!(installed("npx -y mcp-remote {url}"), None);
        assert_eq!(installed(&format!("{} {{url}}", root.join("missing").display())), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_release_other_than_the_profiles_is_named() {
        let note = mismatch("mcp-proxy 0.13.0", "mcp-proxy 0.11.0").unwrap();
        assert!(note.contains("runs mcp-proxy 0.11.0, the profile describes mcp-proxy 0.13.0"), "{note}");
        assert_eq!(mismatch("mcp-proxy 0.13.0", "mcp-proxy 0.13.0"), None);
        assert_eq!(mismatch("relay-bridge", "relay-bridge 0.1.0"), None);
        assert_eq!(mismatch("mcp-proxy 0.13.0", "supergateway 3.0.1"), None);
    }
}
