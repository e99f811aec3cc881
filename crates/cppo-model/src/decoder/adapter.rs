//! A LoRA adapter's products on the backend, for the training tape and the generation path alike:
//! `y += s B (A x)` forward, and backward the gradients of A and B plus the adapter's share of `dx`.
//! Nothing here touches the frozen base weight. The adapter's products are rank-wide and cheap, so
//! they always multiply in f32, whatever the base's products do.

use cppo_io::params::LayerParam;
use cppo_kernels::backend::Backend;
use cppo_kernels::{Float, Precision};

use super::dropout::{dropout_multipliers, site, DropoutKey};
use super::Ctx;

/// Layer `li`'s adapter on weight `p` with its scale and rank, when it has one and adapters are on.
fn adapter<B: Backend>(m: &Ctx<B>, li: usize, p: LayerParam, din: usize) -> Option<(usize, usize, f64, usize)> {
    let s = m.lora?;
    let (ia, ib) = m.ix.lora(li, p)?;
    Some((ia, ib, s, m.b.len(m.w[ia]) / din))
}

/// `s (x A^T)`, `(n, r)`.
fn down<B: Backend>(m: &Ctx<B>, x: B::View<'_>, a: usize, s: f64, n: usize, din: usize, r: usize) -> B::Buf {
    let b = m.b;
    let mut t = b.zeros(n * r);
    b.linear(x, m.w[a], None, din, r, b.view_mut(&mut t), false, Precision::F32);
    b.scaled(b.view(&t), s)
}

/// `x` times its dropout multipliers (`dropout.rs`) for the adapter at `site`.
fn masked<B: Backend>(m: &Ctx<B>, x: B::View<'_>, d: DropoutKey, site: u64) -> B::Buf {
    let mut h = m.b.download(x);
    let n = h.len();
    for (v, k) in h.iter_mut().zip(dropout_multipliers(d.key, site, n, d.p)) {
        *v = *v * B::T::of(k);
    }
    m.b.upload(&h)
}

/// `y (n, dout) += s B (A x)` for the rows `x (n, din)`, when layer `li`'s weight `p` is adapted; in a
/// training pass with dropout, `x` is the adapter's dropped-out input (the base's product saw `x`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn forward<B: Backend>(m: &Ctx<B>, li: usize, p: LayerParam, x: B::View<'_>, n: usize, din: usize, dout: usize, y: B::ViewMut<'_>) {
    let Some((ia, ib, s, r)) = adapter(m, li, p, din) else { return };
    let up = |x: B::View<'_>, y: B::ViewMut<'_>| {
        let t = down(m, x, ia, s, n, din, r);
        m.b.linear(m.b.view(&t), m.w[ib], None, r, dout, y, true, Precision::F32);
    };
    match m.dropout {
        Some(d) => {
            let xd = masked(m, x, d, site(li, p));
            up(m.b.view(&xd), y);
        }
        None => up(x, y),
    }
}

/// Given `dy`, the gradient of the adapted layer's output: the gradients of A and B (into `grads`,
/// where `need` asks for them) and `dx += s A^T (B^T dy)` (times the dropout multipliers, with dropout).
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward<B: Backend>(
    m: &Ctx<B>,
    li: usize,
    p: LayerParam,
    x: B::View<'_>,
    dy: B::View<'_>,
    n: usize,
    din: usize,
    dout: usize,
    dx: B::ViewMut<'_>,
    need: &[bool],
    grads: &mut [Option<B::Buf>],
) {
    let Some((ia, ib, s, r)) = adapter(m, li, p, din) else { return };
    let b = m.b;
    // The adapter's own backward over its input `x` (dropped out or not), adding its share to `dx`.
    let mut run = |x: B::View<'_>, dx: B::ViewMut<'_>| {
        if need[ib] {
            let t = down(m, x, ia, s, n, din, r);
            grads[ib] = Some(b.linear_grad_weight(dy, b.view(&t), r, dout, Precision::F32));
        }
        let mut dt = b.zeros(n * r);
        b.linear_grad_input(b.view_mut(&mut dt), dy, m.w[ib], r, dout, false, Precision::F32);
        let dt = b.scaled(b.view(&dt), s);
        if need[ia] {
            grads[ia] = Some(b.linear_grad_weight(b.view(&dt), x, din, r, Precision::F32));
        }
        b.linear_grad_input(dx, b.view(&dt), m.w[ia], din, r, true, Precision::F32);
    };
    match m.dropout {
        Some(d) => {
            let xd = masked(m, x, d, site(li, p));
            let mut dxd = b.zeros(n * din);
            run(b.view(&xd), b.view_mut(&mut dxd));
            let back = masked(m, b.view(&dxd), d, site(li, p));
            b.add_into(dx, b.view(&back));
        }
        None => run(x, dx),
    }
}
