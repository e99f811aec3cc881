//! Scatter-adds as segments: which source rows add into each destination row, built on the host once
//! per batch. The kernel then gives every destination row to one block that adds its sources in
//! order: deterministic, and a token that appears a thousand times needs no atomics.

/// Destination `dst[u]` receives the sources `src[seg[u]..seg[u + 1]]`, in increasing source order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segments {
    pub dst: Vec<i32>,
    pub seg: Vec<i32>,
    pub src: Vec<i32>,
}

impl Segments {
    /// Source row `k` adds into destination row `targets[k]`.
    pub fn by_target(targets: &[u32]) -> Segments {
        let mut order: Vec<u32> = (0..targets.len() as u32).collect();
        order.sort_by_key(|&k| (targets[k as usize], k));
        let mut s = Segments { dst: Vec::new(), seg: vec![0], src: Vec::with_capacity(targets.len()) };
        for (i, &k) in order.iter().enumerate() {
            let d = targets[k as usize] as i32;
            if s.dst.last() != Some(&d) {
                if !s.dst.is_empty() {
                    s.seg.push(i as i32);
                }
                s.dst.push(d);
            }
            s.src.push(k as i32);
        }
        if !s.dst.is_empty() {
            s.seg.push(order.len() as i32);
        }
        s
    }

    /// Source rows the source buffer must hold.
    pub fn src_rows(&self) -> usize {
        self.src.iter().map(|&k| k as usize + 1).max().unwrap_or(0)
    }

    /// The largest destination row (0 when empty).
    pub fn max_dst(&self) -> usize {
        self.dst.iter().map(|&d| d as usize).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_grouped_by_target_in_order() {
        let s = Segments::by_target(&[5, 2, 5, 0, 2, 5]);
        assert_eq!(s.dst, vec![0, 2, 5]);
        assert_eq!(s.seg, vec![0, 1, 3, 6]);
        assert_eq!(s.src, vec![3, 1, 4, 0, 2, 5]);
        assert_eq!((s.src_rows(), s.max_dst()), (6, 5));
        let e = Segments::by_target(&[]);
        assert_eq!((e.dst.len(), e.seg.clone(), e.src_rows()), (0, vec![0], 0));
    }
}
