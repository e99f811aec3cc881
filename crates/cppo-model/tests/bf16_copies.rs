//! bf16 copies kept beside a backend's f32 weights (`Decoder::keep_bf16_copies`, what a device
//! trainer keeps current through AdamW): at bf16 products the training tape reads them and gives,
//! bit for bit, what the rounded weights give (on AVX512-BF16, what the f32 weights give too); a
//! frozen model may keep its matrices in bf16 only; at f32 products the copies are never read.

mod decoder_support;

use candle_core::DType;
use cppo_kernels::backend::Backend;
use cppo_kernels::cpu::Cpu;
use cppo_kernels::Precision;
use cppo_model::decoder::BackendWeights;
use cppo_model::Decoder;
use decoder_support::{decoder, families, tokens};

type B = Cpu<f32>;

/// Two groups (a shared prompt and its completions).
fn batch(vocab: usize) -> [(Vec<u32>, Vec<Vec<u32>>); 2] {
    [(tokens(5, vocab, 1), vec![tokens(4, vocab, 2), tokens(2, vocab, 3)]), (tokens(3, vocab, 4), vec![tokens(6, vocab, 5)])]
}

/// The scored log-probs and every gradient of one forward and backward pass over `w`.
fn pass(dec: &Decoder, b: &B, w: &BackendWeights<B>) -> (Vec<f32>, Vec<Option<Vec<f32>>>) {
    let batch = batch(dec.config().vocab_size);
    let refs: Vec<Vec<&[u32]>> = batch.iter().map(|(_, c)| c.iter().map(|c| c.as_slice()).collect()).collect();
    let groups: Vec<(&[u32], &[&[u32]])> = batch.iter().zip(&refs).map(|((p, _), r)| (p.as_slice(), r.as_slice())).collect();
    let f = dec.forward_on_weights(b, w, &groups, true).unwrap();
    let logprobs = f.logprobs.clone();
    let dlogp: Vec<f32> = (0..logprobs.len()).map(|i| ((i * 5) % 7) as f32 - 3.0).collect();
    (logprobs, f.backward(&dlogp).unwrap())
}

fn with_copies(dec: &Decoder, b: &B, f32_too: bool) -> BackendWeights<B> {
    let mut w = dec.upload_weights(b).unwrap();
    dec.keep_bf16_copies(b, &mut w, f32_too).unwrap();
    w
}

/// `w` with each weight that `freed` holds in bf16 only replaced by its bf16 rounding, widened: what
/// reading the copies of those weights means.
fn rounded_where_freed(b: &B, mut w: BackendWeights<B>, freed: &BackendWeights<B>) -> BackendWeights<B> {
    for (buf, f) in w.bufs.iter_mut().zip(&freed.bufs) {
        if b.len(b.view(f)) == 0 {
            *buf = b.widen(&b.to_half(b.view(buf)));
        }
    }
    w
}

#[test]
fn at_bf16_products_the_tape_reads_the_copies_and_gives_the_rounded_weights_results() {
    let b = B::new();
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 7, DType::F32).with_matmul_precision(Precision::Bf16);
        let plain = pass(&dec, &b, &dec.upload_weights(&b).unwrap());
        let copies = with_copies(&dec, &b, true);
        assert!(copies.halves.as_ref().unwrap().count() > 0, "{name}");
        // Matrices held in bf16 only (a frozen reference).
        let only = with_copies(&dec, &b, false);
        let empty = only.bufs.iter().filter(|x| b.len(b.view(x)) == 0).count();
        // Every layer matrix is freed; the output projection (tied or not) is read by the log-prob kernels.
        assert_eq!(empty, copies.halves.as_ref().unwrap().count() - 1, "{name}: every layer matrix freed, not the head");
        // Reading a layer matrix's copy is reading its rounding (the CPU's log-prob kernels round the
        // f32 head themselves, so the head's copy is not read here).
        let rounded = pass(&dec, &b, &rounded_where_freed(&b, dec.upload_weights(&b).unwrap(), &only));
        assert_eq!(pass(&dec, &b, &copies), rounded, "{name}: the copies give other results than the rounded weights");
        assert_eq!(pass(&dec, &b, &only).0, rounded.0, "{name}: bf16-only matrices");
        if Precision::bf16_available() {
            // Where bf16 products round their operands (AVX512-BF16), that is what every product gave anyway;
            // elsewhere a bf16 request multiplies in f32 and the copies' rounding shows.
            assert_eq!(rounded, plain, "{name}: bf16 products round the weights themselves");
        } else {
            assert_ne!(rounded.0, plain.0, "{name}: f32 products of rounded weights");
        }
        // The copies are read: copies of other weights give other log-probs.
        let other = decoder(&cfg, 8, DType::F32).with_matmul_precision(Precision::Bf16);
        let mut mixed = dec.upload_weights(&b).unwrap();
        mixed.halves = with_copies(&other, &b, true).halves;
        assert_ne!(pass(&dec, &b, &mixed).0, plain.0, "{name}: the copies were not read");
    }
}

#[test]
fn at_f32_products_the_copies_are_not_read_and_the_f32_matrices_must_stay() {
    let b = B::new();
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 7, DType::F32).with_matmul_precision(Precision::F32);
        let plain = pass(&dec, &b, &dec.upload_weights(&b).unwrap());
        let other = decoder(&cfg, 8, DType::F32).with_matmul_precision(Precision::Bf16);
        let mut mixed = dec.upload_weights(&b).unwrap();
        mixed.halves = with_copies(&other, &b, true).halves;
        assert_eq!(pass(&dec, &b, &mixed), plain, "{name}");
        let mut w = dec.upload_weights(&b).unwrap();
        let e = dec.keep_bf16_copies(&b, &mut w, false).unwrap_err().to_string();
        assert!(e.contains("f32 products"), "{name}: {e}");
    }
}

#[test]
fn a_matrix_with_neither_its_f32_values_nor_a_copy_is_refused_by_name() {
    let b = B::new();
    let (_, cfg) = families().remove(0);
    let dec = decoder(&cfg, 7, DType::F32).with_matmul_precision(Precision::Bf16);
    let mut w = dec.upload_weights(&b).unwrap();
    w.bufs[3] = b.zeros(0);
    let (p, c) = (tokens(3, cfg.vocab_size, 1), tokens(2, cfg.vocab_size, 2));
    let groups: [(&[u32], &[&[u32]]); 1] = [(&p, &[&c])];
    let e = dec.forward_on_weights(&b, &w, &groups, false).err().expect("an error").to_string();
    let name = &cfg.params()[3].name;
    assert!(e.contains(name.as_str()) && e.contains("0 values"), "{e}");
}
