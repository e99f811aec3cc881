//! `train.save_total_limit`: after each complete save the oldest `checkpoints/step-N` folders beyond the
//! limit are deleted, never the one `latest` names, never after a failed save, and nothing else in the
//! folder is touched. A trainer run with the limit keeps exactly the newest checkpoints and resumes.

use cppo_test_support as common;

use std::path::Path;

use anyhow::bail;
use cppo_data::SamplerState;
use cppo_train::checkpoint::{self, TrainerState};
use cppo_train::run::{run, RunOptions};

fn state(step: u64) -> TrainerState {
    TrainerState {
        step,
        seed: 1,
        sampler: SamplerState { seed: 1, epoch: 0, position: step as usize, len: 100 },
        config: String::new(),
        best_eval: None,
    }
}

fn save(out: &Path, step: u64, keep: Option<usize>) -> anyhow::Result<std::path::PathBuf> {
    checkpoint::save(
        out,
        &state(step),
        |dir| {
            std::fs::create_dir_all(dir)?;
            Ok(std::fs::write(dir.join("weights"), step.to_string())?)
        },
        |path| Ok(std::fs::write(path, b"moments")?),
        keep,
    )
}

fn steps_on_disk(out: &Path) -> Vec<u64> {
    checkpoint::list(out).unwrap().into_iter().map(|(s, _)| s).collect()
}

#[test]
fn keeps_the_newest_n_and_only_deletes_after_a_complete_save() {
    let out = common::out_dir("retention-unit");
    let root = checkpoint::checkpoints_dir(&out);
    for step in 1..=3 {
        save(&out, step * 10, None).unwrap();
    }
    // Not checkpoints: left alone whatever the limit.
    std::fs::write(root.join("notes.txt"), b"x").unwrap();
    std::fs::create_dir_all(root.join("step-abc")).unwrap();
    std::fs::create_dir_all(root.join("best")).unwrap();
    assert_eq!(steps_on_disk(&out), vec![10, 20, 30]);

    save(&out, 40, Some(2)).unwrap();
    assert_eq!(steps_on_disk(&out), vec![30, 40]);
    assert_eq!(checkpoint::latest(&out).unwrap().unwrap(), root.join("step-000040"));
    assert_eq!(checkpoint::load_state(&root.join("step-000040")).unwrap().step, 40);
    assert!(root.join("notes.txt").exists() && root.join("step-abc").exists() && root.join("best").exists());
    // No leftovers of the deletion.
    let hidden: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");

    // A save that fails deletes nothing, and `latest` still names the previous checkpoint.
    let failed = checkpoint::save(&out, &state(50), |_| bail!("disk full"), |_| Ok(()), Some(1));
    assert!(failed.is_err());
    assert_eq!(steps_on_disk(&out), vec![30, 40]);
    assert_eq!(checkpoint::latest(&out).unwrap().unwrap(), root.join("step-000040"));

    // The limit counts the new checkpoint: limit 1 leaves only it.
    save(&out, 50, Some(1)).unwrap();
    assert_eq!(steps_on_disk(&out), vec![50]);
    assert_eq!(std::fs::read_to_string(root.join("step-000050/model/weights")).unwrap(), "50");
}

#[test]
fn never_deletes_the_checkpoint_latest_names() {
    let out = common::out_dir("retention-latest");
    let root = checkpoint::checkpoints_dir(&out);
    for step in [1, 2, 3] {
        save(&out, step, None).unwrap();
    }
    // `latest` names an older checkpoint (say, a newer folder was copied in by hand): it survives pruning
    // as an extra besides the newest one.
    std::fs::write(root.join("latest"), b"step-000001").unwrap();
    let deleted = checkpoint::prune(&out, 1).unwrap();
    assert_eq!(deleted, vec![root.join("step-000002")]);
    assert_eq!(steps_on_disk(&out), vec![1, 3]);
    assert_eq!(checkpoint::latest(&out).unwrap().unwrap(), root.join("step-000001"));
}

#[test]
fn zero_is_refused_and_none_keeps_all() {
    let cfg = common::tiny_config("retention-none", &[]);
    assert_eq!(cfg.train.save_total_limit, None);
    let bad = cppo_train::config::TrainConfig::from_toml(&toml::to_string(&cfg).unwrap(), &["train.save_total_limit=0".into()]);
    let msg = format!("{:#}", bad.unwrap_err());
    assert!(msg.contains("train.save_total_limit"), "{msg}");
}

#[test]
fn a_run_with_a_limit_keeps_the_newest_checkpoints_and_resumes() {
    let cfg = common::tiny_config(
        "retention-run",
        &["train.steps=3", "train.save_every=1", "train.save_total_limit=2", "loss.beta=0.0", "data.eval_limit=1"],
    );
    let out = cfg.output_dir.clone();
    let opts = RunOptions { progress: false, ..Default::default() };
    run(cfg.clone(), &opts).unwrap();
    assert_eq!(steps_on_disk(&out), vec![2, 3]);
    assert_eq!(checkpoint::latest(&out).unwrap().unwrap(), checkpoint::checkpoints_dir(&out).join("step-000003"));
    // Resuming the finished run from the newest one works and deletes nothing more.
    let summary = run(cfg, &RunOptions { resume: true, ..opts }).unwrap();
    assert_eq!(summary.steps, 3);
    assert_eq!(steps_on_disk(&out), vec![2, 3]);
}

/// A save or prune killed midway leaves hidden folders and files in `checkpoints/`; the next save
/// removes them, except a previous copy moved aside whose `step-N` is missing (killed between the two
/// renames of a replacement), which it moves back. Complete checkpoints and unknown names stay.
#[test]
fn a_save_removes_the_leftovers_of_an_interrupted_one() {
    let out = common::out_dir("leftovers");
    save(&out, 1, None).unwrap();
    save(&out, 2, None).unwrap();
    let root = checkpoint::checkpoints_dir(&out);
    let mkdir = |name: &str| {
        let d = root.join(name);
        std::fs::create_dir_all(d.join("model")).unwrap();
        std::fs::write(d.join("model/partial"), b"half").unwrap();
        d
    };
    let tmp = mkdir(".step-000003.tmp-99999");
    let deleting = mkdir(".step-000001.deleting-99998");
    // step-000002 is in place: its old copy goes; step-000004 is not: its old copy comes back.
    let old_replaced = mkdir(".step-000002.old-99997");
    let old_only = mkdir(".step-000004.old-99996");
    std::fs::write(old_only.join("trainer_state.json"), b"{}").unwrap();
    std::fs::write(root.join(".latest.tmp-99995"), b"step-000003").unwrap();
    let unknown = mkdir(".notes");
    std::fs::write(root.join("README"), b"mine").unwrap();

    save(&out, 5, None).unwrap();
    for gone in [&tmp, &deleting, &old_replaced, &old_only, &root.join(".latest.tmp-99995")] {
        assert!(!gone.exists(), "{} left behind", gone.display());
    }
    assert!(root.join("step-000004/trainer_state.json").is_file(), "the moved-aside step-000004 was not restored");
    assert!(unknown.exists() && root.join("README").exists(), "a save removed something it did not write");
    assert_eq!(steps_on_disk(&out), vec![1, 2, 4, 5]);
    assert_eq!(std::fs::read_to_string(root.join("step-000002/model/weights")).unwrap(), "2");
}
