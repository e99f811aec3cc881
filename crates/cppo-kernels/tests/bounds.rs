//! The safe kernel entry points that walk raw views check their operands first: a short slice or an
//! overlapping layout stops with a panic naming it, instead of reading or writing out of bounds.

use cppo_kernels::attention::{AttnLayout, Span};
use cppo_kernels::linear;
use cppo_kernels::Precision;

fn panics(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let e = std::panic::catch_unwind(f).expect_err("a short operand must stop the kernel");
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

#[test]
fn linear_products_refuse_short_operands() {
    let (n, din, dout) = (3, 5, 4);
    let x = vec![1f32; n * din];
    for p in [Precision::F32, Precision::Bf16] {
        // The right sizes run.
        let mut y = vec![0f32; n * dout];
        linear::accumulate(&mut y, &x, &vec![1f32; dout * din], din, dout, false, p);
        assert!(y.iter().all(|&v| (v - din as f32).abs() < 1e-3), "{y:?}");
        // One value short in w, in y, in dx, in x.
        assert!(panics(move || linear::accumulate(&mut vec![0f32; n * dout], &vec![1f32; n * din], &vec![1f32; dout * din - 1], din, dout, false, p)).contains("linear"));
        assert!(panics(move || linear::accumulate(&mut vec![0f32; n * dout - 1], &vec![1f32; n * din], &vec![1f32; dout * din], din, dout, true, p)).contains("linear"));
        assert!(panics(move || linear::grad_input(&mut vec![0f32; n * din - 1], &vec![1f32; n * dout], &vec![1f32; dout * din], din, dout, false, p)).contains("linear"));
        assert!(panics(move || {
            linear::grad_weight(&vec![1f32; n * dout], &vec![1f32; n * din - 1], din, dout, p);
        })
        .contains("linear"));
    }
}

#[test]
fn an_attention_layout_with_overlapping_spans_is_refused() {
    let ok = AttnLayout::sequences(&[3, 2]);
    assert!(ok.validate().is_ok());
    let overlapping = AttnLayout {
        rows: 5,
        spans: vec![Span { start: 0, len: 3, prefix: None }, Span { start: 2, len: 3, prefix: None }],
        positions: vec![0, 1, 2, 0, 1],
    };
    let e = overlapping.validate().unwrap_err().to_string();
    assert!(e.contains("overlap"), "{e}");
}
