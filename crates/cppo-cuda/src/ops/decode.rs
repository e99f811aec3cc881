//! The key/value cache of rollouts (bf16 on the device's rollout path; f32 where the `Backend`
//! trait's cache is the backend's f32 buffer): appending a step's keys and values, and the attention of one
//! query row per sequence over a shared prompt's keys and its own.

use super::{int, name, FLOAT, I32};
use crate::buf::Buf;
use crate::error::{Error, Result};
use crate::geometry::Tune;
use crate::launch::{launch, Arg, Launcher};

/// One layer's cache: (rows, kv_heads, max_len, head_dim) for keys, and the same for values; both
/// bf16 or both f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheShape {
    pub rows: usize,
    pub kv_heads: usize,
    pub max_len: usize,
    pub head_dim: usize,
}

impl CacheShape {
    pub fn elements(&self) -> usize {
        self.rows * self.kv_heads * self.max_len * self.head_dim
    }

    fn check(&self, op: &'static str, kc: Buf, vc: Buf) -> Result<()> {
        kc.need(op, "key cache", FLOAT, self.elements())?;
        vc.need(op, "value cache", &[kc.dtype], self.elements())?;
        int(op, "cache elements", self.elements()).map(|_| ())
    }
}

/// Writes token `t`'s keys and values (rows of `kv_heads * head_dim`) at cache row `rows[t]`,
/// position `pos[t]`. `slots` are the same pairs on the host, checked against the cache.
#[allow(clippy::too_many_arguments)]
pub fn append(l: &mut dyn Launcher, t: &Tune, c: &CacheShape, k: Buf, v: Buf, kc: Buf, vc: Buf, rows: Buf, pos: Buf, slots: &[(usize, usize)]) -> Result<()> {
    const OP: &str = "kv_append";
    let n = slots.len();
    let width = c.kv_heads * c.head_dim;
    c.check(OP, kc, vc)?;
    k.need(OP, "keys", FLOAT, n * width)?;
    v.need(OP, "values", &[k.dtype], n * width)?;
    rows.need(OP, "rows", I32, n)?;
    pos.need(OP, "positions", I32, n)?;
    if let Some(&(r, p)) = slots.iter().find(|&&(r, p)| r >= c.rows || p >= c.max_len) {
        return Err(Error::shape(OP, format!("row {r} position {p} outside a cache of {} x {}", c.rows, c.max_len)));
    }
    let args = [
        k.into(),
        v.into(),
        kc.into(),
        vc.into(),
        rows.into(),
        pos.into(),
        Arg::I32(int(OP, "tokens", n)?),
        Arg::I32(c.kv_heads as i32),
        Arg::I32(c.head_dim as i32),
        Arg::I32(c.max_len as i32),
    ];
    launch(l, &name(OP, &[k, kc]), t.flat(n * width), &args)
}

/// Positions `start .. start + len` of cache row `row`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub row: usize,
    pub start: usize,
    pub len: usize,
}

/// The keys one query row attends to: a shared prompt's (if any), then its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keys {
    pub prompt: Option<Segment>,
    pub own: Segment,
}

/// The kernel's table: six i32 per query row.
pub fn segment_table(keys: &[Keys]) -> Vec<i32> {
    keys.iter()
        .flat_map(|k| {
            let p = k.prompt.unwrap_or(Segment { row: 0, start: 0, len: 0 });
            [p.row, p.start, p.len, k.own.row, k.own.start, k.own.len].map(|v| v as i32)
        })
        .collect()
}

/// `out (n x heads x head_dim) = softmax(scale q k^T) v` over each row's `keys`; `segs` is
/// `segment_table(keys)` on the device.
#[allow(clippy::too_many_arguments)]
pub fn attention(l: &mut dyn Launcher, t: &Tune, c: &CacheShape, heads: usize, q: Buf, kc: Buf, vc: Buf, out: Buf, segs: Buf, keys: &[Keys], scale: f32) -> Result<()> {
    const OP: &str = "decode_attention";
    let n = keys.len();
    let d = c.head_dim;
    c.check(OP, kc, vc)?;
    q.need(OP, "queries", FLOAT, n * heads * d)?;
    out.need(OP, "out", FLOAT, n * heads * d)?;
    segs.need(OP, "segments", I32, 6 * n)?;
    if c.kv_heads == 0 || !heads.is_multiple_of(c.kv_heads) {
        return Err(Error::shape(OP, format!("{heads} heads over {} kv heads", c.kv_heads)));
    }
    let mut max_keys = 1;
    for k in keys {
        for s in k.prompt.iter().chain([&k.own]) {
            if s.row >= c.rows || s.start + s.len > c.max_len {
                return Err(Error::shape(OP, format!("{s:?} outside a cache of {} x {}", c.rows, c.max_len)));
            }
        }
        let total = k.prompt.map_or(0, |p| p.len) + k.own.len;
        if total == 0 {
            return Err(Error::shape(OP, "a query row with no keys"));
        }
        max_keys = max_keys.max(total);
    }
    let shared = ((d + max_keys) * 4) as u32;
    let cfg = t.rows(n * heads, d).with_shared(shared);
    let args = [
        q.into(),
        kc.into(),
        vc.into(),
        out.into(),
        segs.into(),
        Arg::I32(int(OP, "rows", n)?),
        Arg::I32(int(OP, "heads", heads)?),
        Arg::I32(c.kv_heads as i32),
        Arg::I32(d as i32),
        Arg::I32(c.max_len as i32),
        Arg::I32(int(OP, "keys", max_keys)?),
        Arg::F32(scale),
    ];
    launch(l, &name(OP, &[q, kc, out]), cfg, &args)
}
