//! The emulation itself: warp exchanges and shared memory compute what a GPU computes, and misuse a
//! GPU would turn into a hang or garbage is reported with its source line.

use cppo_cuda::{Arg, DType, LaunchConfig, Launcher};

use crate::emu::{Emu, SELFTEST};

fn run(name: &str, grid: u32, block: u32, shared: u32, n: i32, len: usize) -> (Emu, cppo_cuda::Buf, cppo_cuda::Result<()>) {
    let k = SELFTEST.iter().find(|k| k.name == name).expect("a selftest kernel");
    let mut emu = Emu::cpu();
    let out = emu.alloc(DType::I32, len);
    // SAFETY: every selftest kernel takes (int* out, int n), and `out` holds `len` ints; the geometry
    // is what these tests probe: the emulation reports what a GPU would do wrong.
    let r = unsafe { emu.launch_raw(k, LaunchConfig::blocks(grid, block).with_shared(shared), &[out.into(), Arg::I32(n)]) };
    (emu, out, r)
}

fn error(r: cppo_cuda::Result<()>) -> String {
    r.expect_err("the emulation must refuse this").to_string()
}

#[test]
fn barriers_in_divergent_code_are_reported_not_hung() {
    let e = error(run("emu_divergent_barrier", 1, 64, 0, 40, 64).2);
    assert!(e.contains("deadlock") && e.contains("selftest.cu:5"), "{e}");
    let e = error(run("emu_two_barriers", 2, 64, 0, 0, 64).2);
    assert!(e.contains("__syncthreads at") && e.contains("selftest.cu:"), "{e}");
    let e = error(run("emu_partial_mask", 1, 32, 0, 3, 32).2);
    assert!(e.contains("partial mask"), "{e}");
    let e = error(run("emu_warp_ops", 1, 48, 0, 3, 8 * 48).2);
    assert!(e.contains("not whole warps"), "{e}");
    let e = error(run("emu_write_past", 1, 32, 0, 32, 32).2);
    assert!(e.contains("outside a buffer"), "{e}");
    // The emulation is usable again after a failed launch.
    let (_, _, r) = run("emu_divergent_barrier", 2, 64, 0, 64, 64);
    r.unwrap();
}

#[test]
fn warp_exchanges_and_block_sums_match_the_cuda_definitions() {
    let (block, n) = (96usize, 70);
    let (emu, out, r) = run("emu_warp_ops", 1, block as u32, 0, n, 8 * block);
    r.unwrap();
    let o = emu.read::<i32>(out);
    let sum: i32 = (0..block as i32).sum();
    for t in 0..block {
        let (lane, base) = (t % 32, t - t % 32);
        let got = &o[8 * t..8 * t + 8];
        let ballot = (0..32).filter(|l| l % 3 == 0).fold(0u32, |m, l| m | 1 << l) as i32;
        let any = (n as usize / 32 == t / 32) as i32;
        let want = [
            (base + (lane ^ 5)) as i32,
            if lane + 3 < 32 { t + 3 } else { t } as i32,
            if lane >= 3 { t - 3 } else { t } as i32,
            (base + 7) as i32,
            ballot,
            any,
            0,
            sum,
        ];
        assert_eq!(got, want, "thread {t}");
    }
}

#[test]
fn shared_memory_belongs_to_the_block_and_starts_poisoned() {
    let (grid, block) = (3usize, 64usize);
    let (emu, out, r) = run("emu_shared", grid as u32, block as u32, (block * 4) as u32, 5, grid * block);
    r.unwrap();
    let o = emu.read::<i32>(out);
    for b in 0..grid {
        for t in 0..block {
            assert_eq!(o[b * block + t], (b * 1000 + (t + 1) % block) as i32 + 5, "block {b} thread {t}");
        }
    }
}
