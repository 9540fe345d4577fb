//! The container image (`Dockerfile`, built without a daemon by `scripts/build-image.sh` into
//! an OCI image layout): it holds one file, the static `sluice`, runs it as an unprivileged
//! user, and works: unpacked by `umoci` and run by `crun` (both Debian packages) on the host
//! network, it does `sluice check` and a bounded read against the real broker; the rows it
//! writes are owned by the image's user, not root.
//!
//! Skipped (SKIPPED line) without the image, umoci, crun or root; under `CI=true` that fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value == "true")
}

fn skip(reason: &str) {
    if ci() {
        panic!("CI=true: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
}

fn layout() -> PathBuf {
    sluice_tests::repo_root().join("target/image/oci")
}

/// A blob of the layout by its digest (`sha256:<hex>`).
fn blob(digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    std::fs::read(layout().join("blobs/sha256").join(hex)).expect("read blob")
}

/// The manifest and image configuration of the layout's one image.
fn manifest_and_config() -> (Value, Value) {
    let index: Value = serde_json::from_slice(&std::fs::read(layout().join("index.json")).unwrap()).unwrap();
    let manifests = index["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 1, "one image: {index}");
    let manifest: Value = serde_json::from_slice(&blob(manifests[0]["digest"].as_str().unwrap())).unwrap();
    let config: Value = serde_json::from_slice(&blob(manifest["config"]["digest"].as_str().unwrap())).unwrap();
    (manifest, config)
}

/// `gzip -dc` of `bytes`.
fn gunzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run gzip");
    let mut stdin = child.stdin.take().unwrap();
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().expect("gzip output");
    writer.join().unwrap().expect("feed gzip");
    assert!(output.status.success(), "gzip -dc failed");
    output.stdout
}

/// The entries of an uncompressed tar: (name, type flag, mode, uid, size).
fn tar_entries(bytes: &[u8]) -> Vec<(String, u8, u32, u32, u64)> {
    let octal = |field: &[u8]| {
        let text: String = field.iter().take_while(|&&b| b != 0 && b != b' ').map(|&b| b as char).collect();
        u64::from_str_radix(text.trim(), 8).unwrap_or(0)
    };
    let mut entries = Vec::new();
    let mut at = 0;
    while at + 512 <= bytes.len() {
        let header = &bytes[at..at + 512];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let name: String = header[..100].iter().take_while(|&&b| b != 0).map(|&b| b as char).collect();
        let size = octal(&header[124..136]);
        entries.push((name, header[156], octal(&header[100..108]) as u32, octal(&header[108..116]) as u32, size));
        at += 512 + (size as usize).div_ceil(512) * 512;
    }
    entries
}

#[test]
fn the_image_holds_one_file_and_names_an_unprivileged_user() {
    if !layout().join("index.json").is_file() {
        return skip("no image at target/image/oci: build it with scripts/build-image.sh");
    }
    let (manifest, config) = manifest_and_config();
    assert_eq!(config["config"]["User"], "65532:65532", "{config}");
    assert_eq!(config["config"]["Entrypoint"], json!(["/sluice"]), "{config}");
    assert_eq!(config["os"], "linux");
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1, "{manifest}");
    let layer = blob(layers[0]["digest"].as_str().unwrap());
    let tar = match layers[0]["mediaType"].as_str() {
        Some("application/vnd.oci.image.layer.v1.tar") => layer,
        Some("application/vnd.oci.image.layer.v1.tar+gzip") => gunzip(&layer),
        other => panic!("a tar layer, not {other:?}"),
    };
    let entries = tar_entries(&tar);
    let files: Vec<_> = entries.iter().filter(|entry| entry.1 == b'0' || entry.1 == 0).collect();
    assert_eq!(files.len(), 1, "one file: {entries:?}");
    let (name, _, mode, _, size) = files[0];
    assert_eq!(name.trim_start_matches("./"), "sluice");
    assert_eq!(mode & 0o111, 0o111, "executable: {mode:o}");
    let binary = sluice_tests::repo_root().join("target/x86_64-unknown-linux-musl/release/sluice");
    assert_eq!(*size, std::fs::metadata(&binary).expect("the static binary").len(), "the static binary itself");
    let others: Vec<_> = entries.iter().filter(|entry| !(entry.1 == b'5' || entry.1 == b'0' || entry.1 == 0)).collect();
    assert!(others.is_empty(), "nothing but the file (and directories): {others:?}");
}

fn available(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|output| output.status.success())
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

/// Runs the unpacked image in `bundle` with `args`, the config file and `/out` bound in, on
/// the host network. Returns (exit code, stdout, stderr).
fn run_container(bundle: &Path, config: &Path, out: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let spec_path = bundle.join("config.json");
    let mut spec: Value = serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
    spec["process"]["args"] = json!(std::iter::once("/sluice").chain(args.iter().copied()).collect::<Vec<_>>());
    spec["process"]["terminal"] = json!(false);
    // The host's network, so that 127.0.0.1 is the test broker.
    let namespaces = spec["linux"]["namespaces"].as_array().cloned().unwrap_or_default();
    spec["linux"]["namespaces"] =
        json!(namespaces.into_iter().filter(|ns| ns["type"] != "network").collect::<Vec<_>>());
    if let Some(linux) = spec["linux"].as_object_mut() {
        linux.remove("cgroupsPath");
        linux.remove("resources");
    }
    let mounts = spec["mounts"].as_array_mut().expect("mounts");
    mounts.push(json!({"destination": "/config.json", "type": "bind", "source": config, "options": ["bind", "ro"]}));
    mounts.push(json!({"destination": "/out", "type": "bind", "source": out, "options": ["bind", "rw"]}));
    std::fs::write(&spec_path, serde_json::to_vec_pretty(&spec).unwrap()).unwrap();
    let id = format!("sluice-image-test-{}-{}", std::process::id(), args[0]);
    // No cgroups: this is a test of the image, not of resource limits. crun refuses a host with
    // hybrid cgroups whose v2 hierarchy has controllers ("cgroups in hybrid mode not supported"),
    // even with the cgroup manager disabled; in a mount namespace of its own, without the v2
    // mount, it sees plain v1 and runs.
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            "if grep -q ' /sys/fs/cgroup/unified cgroup2 ' /proc/self/mounts; then umount /sys/fs/cgroup/unified; fi; \
             exec crun \"$@\"",
        )
        .args(["sh", "--cgroup-manager=disabled", "run", "--bundle"])
        .arg(bundle)
        .arg(&id)
        .output()
        .expect("run crun");
    let _ = Command::new("crun").args(["delete", "--force", &id]).output();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into(),
        String::from_utf8_lossy(&output.stderr).into(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_image_runs_check_and_a_bounded_read_as_its_own_user() {
    if !layout().join("index.json").is_file() {
        return skip("no image at target/image/oci: build it with scripts/build-image.sh");
    }
    if !available("umoci") || !available("crun") || !is_root() {
        return skip("running the image needs root, umoci and crun (apt-get install umoci crun)");
    }
    let Some(client) = sluice_tests::client().await else { return };
    let topic = common::create_topic(&client, "image", 2, &[]).await;
    common::produce_json(&client, &topic, 0, &[json!({"n": 1}), json!({"n": 2})]).await;
    common::produce_json(&client, &topic, 1, &[json!({"n": 3})]).await;

    let dir = common::temp_dir("image");
    let bundle = dir.join("bundle");
    let unpacked = Command::new("umoci")
        .args(["unpack", "--image"])
        .arg(format!("{}:latest", layout().display()))
        .arg(&bundle)
        .output()
        .expect("run umoci");
    assert!(unpacked.status.success(), "umoci unpack: {}", String::from_utf8_lossy(&unpacked.stderr));
    let rootfs: Vec<_> = std::fs::read_dir(bundle.join("rootfs")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(rootfs, ["sluice"], "the root file system holds the binary alone");
    let spec: Value = serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    assert_eq!(spec["process"]["user"]["uid"], 65532, "{}", spec["process"]);

    let config = dir.join("config.json");
    std::fs::write(&config, json!({"brokers": [sluice_tests::broker_address()], "topics": [topic]}).to_string())
        .unwrap();
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    // Writable by the image's user only through the mode: the process is not root.
    Command::new("chmod").args(["777"]).arg(&out).status().unwrap();

    let (code, stdout, stderr) = run_container(&bundle, &config, &out, &["check", "--config", "/config.json"]);
    assert_eq!(code, Some(0), "check in the container: {stdout}{stderr}");
    assert!(stdout.contains("cluster id: "), "{stdout}");

    let (code, stdout, stderr) = run_container(
        &bundle,
        &config,
        &out,
        &["read", "--config", "/config.json", "--dest", "/out", "--mode", "bounded"],
    );
    assert_eq!(code, Some(0), "a bounded read in the container: {stdout}{stderr}");
    let rows = common::read_rows(&out, &topic);
    assert_eq!(common::coordinates(&rows), [(0, 0), (0, 1), (1, 0)], "every record once");
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(out.join("_sluice/checkpoints.json")).unwrap());
    assert_eq!(owner, 65532, "written by the image's unprivileged user");
}
