//! Charts render to real PNG files of the expected size.

use cppo::plot::{line_chart, stacked_bars, Series};

fn png_size(path: &std::path::Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{} is not a PNG", path.display());
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    (w, h)
}

#[test]
fn line_and_bar_charts_write_pngs() {
    let dir = std::env::temp_dir().join(format!("cppo-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("lines.png");
    line_chart(&a, "reward", "step", "mean reward", &[
        Series { name: "grpo".into(), points: vec![(1.0, 0.1), (2.0, 0.3), (3.0, 0.35)] },
        Series { name: "cppo".into(), points: vec![(1.0, 0.1), (2.0, f64::NAN), (3.0, 0.5)] },
    ])
    .unwrap();
    assert_eq!(png_size(&a), (900, 560));
    let b = dir.join("bars.png");
    stacked_bars(&b, "time", "seconds", &["grpo".into(), "cppo".into()], &[
        ("generation".into(), vec![10.0, 10.0]),
        ("update".into(), vec![20.0, 4.0]),
    ])
    .unwrap();
    assert_eq!(png_size(&b), (900, 560));
    // Degenerate input still renders.
    line_chart(&dir.join("empty.png"), "empty", "x", "y", &[]).unwrap();
    if std::env::var_os("CPPO_KEEP_PLOTS").is_none() {
        std::fs::remove_dir_all(&dir).ok();
    }
}
