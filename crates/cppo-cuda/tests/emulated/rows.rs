use cppo_cuda::index::Segments;
use cppo_cuda::ops::rows;
use cppo_cuda::DType::{Bf16, F32};
use rand::Rng;

use crate::check::{as_stored, assert_close, read_f32, rng, store_rel, tunes, uniform, upload};
use crate::emu::Emu;

#[test]
fn gather_copies_the_rows_asked_for() {
    let mut r = rng("gather");
    let (vocab, width, n) = (23, 45, 31);
    let table0 = uniform(&mut r, vocab * width, -1.0, 1.0);
    let ids0: Vec<i32> = (0..n).map(|_| r.gen_range(0..vocab as i32)).collect();
    for t in tunes() {
        for (td, od) in [(F32, F32), (Bf16, F32), (F32, Bf16), (Bf16, Bf16)] {
            let mut emu = Emu::new();
            let table = upload(&mut emu, &table0, td);
            let ids = emu.upload(&ids0);
            let out = emu.alloc(od, n * width);
            rows::gather(&mut emu, &t, table, vocab, ids, out, n, width).unwrap();
            let ts = as_stored(&table0, td);
            let want: Vec<f64> = ids0.iter().flat_map(|&i| ts[i as usize * width..(i as usize + 1) * width].iter().map(|&v| v as f64)).collect();
            assert_close("gather", &read_f32(&emu, out), &want, store_rel(od), 0.0);
        }
    }
}

/// The embedding's backward: repeated tokens add up, untouched rows keep their value.
#[test]
fn index_add_sums_every_source_into_its_row() {
    let mut r = rng("index_add");
    let (vocab, width, n) = (13, 37, 41);
    let ids: Vec<u32> = (0..n).map(|_| r.gen_range(0..vocab as u32 / 2) * 2).collect();
    let src0 = uniform(&mut r, n * width, -1.0, 1.0);
    let dst0 = uniform(&mut r, vocab * width, -1.0, 1.0);
    let seg = Segments::by_target(&ids);
    for t in tunes() {
        for sd in [F32, Bf16] {
            let mut emu = Emu::new();
            let dst = emu.upload(&dst0);
            let src = upload(&mut emu, &src0, sd);
            let dev = [emu.upload(&seg.dst), emu.upload(&seg.seg), emu.upload(&seg.src)];
            rows::index_add(&mut emu, &t, dst, vocab, src, &seg, dev, width).unwrap();
            let ss = as_stored(&src0, sd);
            let mut want: Vec<f64> = dst0.iter().map(|&v| v as f64).collect();
            for (k, &id) in ids.iter().enumerate() {
                for c in 0..width {
                    want[id as usize * width + c] += ss[k * width + c] as f64;
                }
            }
            assert_close("index_add", &emu.read::<f32>(dst), &want, 1e-6, 1e-6);
        }
    }
}

#[test]
fn sum_rows_adds_columns() {
    let mut r = rng("sum_rows");
    let (rows, cols) = (19, 70);
    let x0 = uniform(&mut r, rows * cols, -1.0, 1.0);
    let o0 = uniform(&mut r, cols, -1.0, 1.0);
    for t in tunes() {
        for (xd, acc) in [(F32, false), (Bf16, true)] {
            let mut emu = Emu::new();
            let x = upload(&mut emu, &x0, xd);
            let out = if acc { emu.upload(&o0) } else { emu.alloc(F32, cols) };
            rows::sum_rows(&mut emu, &t, x, out, rows, cols, acc).unwrap();
            let xs = as_stored(&x0, xd);
            let want: Vec<f64> = (0..cols).map(|c| (0..rows).map(|r| xs[r * cols + c] as f64).sum::<f64>() + if acc { o0[c] as f64 } else { 0.0 }).collect();
            assert_close("sum_rows", &emu.read::<f32>(out), &want, 1e-6, 1e-5);
        }
    }
}
