//! A progress bar per downloaded file on a terminal; in a log (no terminal) one line per file, so a
//! long download is visible there too.

use std::io::IsTerminal;

use indicatif::{HumanBytes, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub(crate) struct DownloadProgress {
    enabled: bool,
    label: String,
    bar: Option<ProgressBar>,
}

impl DownloadProgress {
    pub fn new(enabled: bool, label: String) -> Self {
        DownloadProgress {
            enabled,
            label,
            bar: None,
        }
    }
}

impl hf_hub::api::Progress for DownloadProgress {
    /// Called once per attempt (a resumed attempt reports its starting offset through `update`).
    fn init(&mut self, size: usize, filename: &str) {
        if !self.enabled {
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            if !std::io::stderr().is_terminal() {
                eprintln!("downloading {} {filename} ({})", self.label, HumanBytes(size as u64));
            }
            let bar = ProgressBar::with_draw_target(Some(size as u64), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{msg} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(filename.to_owned());
            bar
        });
        bar.set_length(size as u64);
        bar.set_position(0);
    }

    fn update(&mut self, size: usize) {
        if let Some(bar) = &self.bar {
            bar.inc(size as u64);
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
