//! `DeviceForward::backward_into`: each trainable weight's gradient handed over once, layer by layer
//! from the last (so a device trainer sums it into its flat buffer and frees it before the next
//! layer's), with exactly `backward`'s values.

mod decoder_support;

use candle_core::DType;
use cppo_kernels::cpu::Cpu;
use decoder_support::{decoder, families, tokens};

#[test]
fn gradients_come_once_each_layer_by_layer_with_backwards_values() {
    let b = Cpu::<f32>::new();
    for (name, cfg) in families() {
        let dec = decoder(&cfg, 3, DType::F32);
        let w = dec.upload_weights(&b).unwrap();
        let (prompt, comps) = (tokens(4, cfg.vocab_size, 1), [tokens(3, cfg.vocab_size, 2), tokens(5, cfg.vocab_size, 3)]);
        let refs: Vec<&[u32]> = comps.iter().map(|c| c.as_slice()).collect();
        let groups: [(&[u32], &[&[u32]]); 1] = [(&prompt, &refs)];
        let f = dec.forward_on_weights(&b, &w, &groups, true).unwrap();
        let dlogp: Vec<f32> = (0..f.logprobs.len()).map(|i| ((i * 3) % 5) as f32 - 2.0).collect();
        let whole = f.backward(&dlogp).unwrap();
        let f = dec.forward_on_weights(&b, &w, &groups, true).unwrap();
        let mut got: Vec<(usize, Vec<f32>)> = Vec::new();
        f.backward_into(&dlogp, &mut |i, g| got.push((i, g))).unwrap();
        let mut indices: Vec<usize> = got.iter().map(|g| g.0).collect();
        // Layer by layer from the last: the layer numbers in the parameters' names never go up.
        let params = cfg.params();
        let layer = |i: usize| params[i].name.split('.').nth(2).and_then(|l| l.parse::<usize>().ok());
        let layers: Vec<usize> = indices.iter().filter_map(|&i| layer(i)).collect();
        assert!(layers.windows(2).all(|w| w[0] >= w[1]), "{name}: {layers:?}");
        assert_eq!(layers.first(), Some(&(cfg.num_hidden_layers - 1)), "{name}");
        indices.sort_unstable();
        let wanted: Vec<usize> = whole.iter().enumerate().filter_map(|(i, g)| g.as_ref().map(|_| i)).collect();
        assert_eq!(indices, wanted, "{name}: each trainable weight once");
        for (i, g) in got {
            assert_eq!(Some(&g), whole[i].as_ref(), "{name}: {}", params[i].name);
        }
    }
}
