//! The training path's public face: log-probs of completions over packed rows, so that k completions
//! share one forward pass of their prompt (run on the tape, `tape.rs`; its backward pass is taken
//! from dL/dlogp through `backward.rs`), and plain logits of whole sequences.

use candle_core::{DType, Tensor};

use super::backward::{held, AnyTape, Backward};
use super::{tape, with_ctx, Ctx, Decoder, DecoderError, Result};
use cppo_kernels::attention::AttnLayout;
use cppo_kernels::logprob::Gather;

/// Per-token log-probabilities of k completions of one prompt, right-padded to the longest.
#[derive(Clone, Debug)]
pub struct CompletionLogProbs {
    /// (k, Lmax): `logprobs[j][t] = log p(completions[j][t] | prompt, completions[j][..t])`, 0 on padding.
    pub logprobs: Tensor,
    /// (k, Lmax): 1 for real tokens, 0 for padding (the decoder's dtype).
    pub mask: Tensor,
    /// (k, Lmax): the entropy of each predicted distribution; 0 on padding.
    pub entropy: Tensor,
    /// The backward pass from dL/dlogp (shaped like `logprobs`), when the call kept a gradient (a
    /// trainable decoder, not `*_detached`); `None` on the parts `per_group` cuts, whose backward is
    /// the whole call's.
    pub backward: Option<Backward>,
}

impl CompletionLogProbs {
    /// The rows of each group of a grouped call (the same `groups`), each cut to its own longest
    /// completion: what scoring that group alone returns.
    pub fn per_group(&self, groups: &[(&[u32], &[&[u32]])]) -> Result<Vec<CompletionLogProbs>> {
        let mut row = 0;
        let mut out = Vec::with_capacity(groups.len());
        for (_, completions) in groups {
            let (k, width) = (completions.len(), completions.iter().map(|c| c.len()).max().unwrap_or(0));
            let cut = |t: &Tensor| t.narrow(0, row, k)?.narrow(1, 0, width);
            out.push(CompletionLogProbs { logprobs: cut(&self.logprobs)?, mask: cut(&self.mask)?, entropy: cut(&self.entropy)?, backward: None });
            row += k;
        }
        Ok(out)
    }
}

impl Decoder {
    /// Logits `(b, t, vocab)` of a batch of token sequences `(b, t)` (u32 or i64), by the training
    /// path's layers with exact products; no gradient graph.
    pub fn forward_logits(&self, tokens: &Tensor) -> Result<Tensor> {
        let (b, t) = tokens.dims2()?;
        let ids: Vec<u32> = tokens.to_dtype(DType::U32)?.flatten_all()?.to_vec1()?;
        self.check_tokens(&ids)?;
        self.check_positions(t)?;
        let layout = AttnLayout::batch(b, t);
        let shape = (b, t, self.config().vocab_size);
        match self.dtype() {
            DType::F32 => Ok(Tensor::from_vec(with_ctx!(self, f32, |m| tape::logits(&m, &ids, layout)?), shape, self.device())?),
            DType::F64 => Ok(Tensor::from_vec(with_ctx!(self, f64, |m| tape::logits(&m, &ids, layout)?), shape, self.device())?),
            other => Err(DecoderError::BadInput(format!("unsupported compute dtype {other:?}"))),
        }
    }

    /// A sequence of `len` positions fits the rotary table.
    fn check_positions(&self, len: usize) -> Result<()> {
        let max = self.config().max_position_embeddings;
        if len > max {
            return Err(DecoderError::BadInput(format!("sequence reaches position {}, beyond max_position_embeddings {max}", len - 1)));
        }
        Ok(())
    }

    /// Log-probabilities of each completion's tokens after `prompt`, with the prompt's forward pass
    /// computed once and shared by the completions (its gradient collects all of theirs).
    pub fn completion_logprobs(&self, prompt: &[u32], completions: &[&[u32]]) -> Result<CompletionLogProbs> {
        self.completion_logprobs_with(prompt, completions, self.is_trainable())
    }

    /// As `completion_logprobs`, without a gradient graph even for a trainable decoder (e.g. the
    /// sampling policy's "old" log-probs): nothing is kept for a backward pass.
    pub fn completion_logprobs_detached(&self, prompt: &[u32], completions: &[&[u32]]) -> Result<CompletionLogProbs> {
        self.completion_logprobs_with(prompt, completions, false)
    }

    fn completion_logprobs_with(&self, prompt: &[u32], completions: &[&[u32]], grad: bool) -> Result<CompletionLogProbs> {
        self.grouped_with(&[(prompt, completions)], grad)
    }

    /// `completion_logprobs` of several questions in one forward pass (one backward pass later): each
    /// prompt is computed once and seen only by its own completions. Rows are every group's
    /// completions in order, right-padded to the longest of all. One pass over all the rows runs
    /// the large products once instead of once per question (their weights are read, and in bf16
    /// packed, once), and the weight gradients come out once.
    pub fn grouped_completion_logprobs(&self, groups: &[(&[u32], &[&[u32]])]) -> Result<CompletionLogProbs> {
        self.grouped_with(groups, self.is_trainable())
    }

    /// As `grouped_completion_logprobs`, without a gradient graph.
    pub fn grouped_completion_logprobs_detached(&self, groups: &[(&[u32], &[&[u32]])]) -> Result<CompletionLogProbs> {
        self.grouped_with(groups, false)
    }

    /// The packed rows of `groups` (each prompt once, then its completions fed but their last token),
    /// their attention layout, what to score, and the output mask.
    pub(crate) fn grouped_inputs(&self, groups: &[(&[u32], &[&[u32]])]) -> Result<(Vec<u32>, AttnLayout, Gather, Vec<f64>)> {
        for (prompt, completions) in groups {
            if prompt.is_empty() {
                return Err(DecoderError::BadInput("completion_logprobs: the prompt is empty".into()));
            }
            self.check_tokens(prompt)?;
            for c in completions.iter() {
                self.check_tokens(c)?;
            }
        }
        let k: usize = groups.iter().map(|(_, c)| c.len()).sum();
        let lmax = groups.iter().flat_map(|(_, c)| c.iter().map(|c| c.len())).max().unwrap_or(0);
        // A completion's last token predicts nothing, so it is not fed to the model.
        let fed: Vec<Vec<usize>> = groups.iter().map(|(_, c)| c.iter().map(|c| c.len().saturating_sub(1)).collect()).collect();
        let layout = AttnLayout::shared_prefixes(&groups.iter().zip(&fed).map(|((p, _), f)| (p.len(), f.as_slice())).collect::<Vec<_>>());
        let mut tokens = Vec::with_capacity(layout.rows);
        let mut gather = Gather { rows: vec![], targets: vec![], out_index: vec![], out_shape: vec![k, lmax], chunk_cols: 0 };
        let mut mask = vec![0f64; k * lmax];
        let mut j = 0;
        for ((prompt, completions), fed) in groups.iter().zip(&fed) {
            let (p0, lp) = (tokens.len(), prompt.len());
            tokens.extend_from_slice(prompt);
            for (c, &n) in completions.iter().zip(fed) {
                let start = tokens.len();
                tokens.extend_from_slice(&c[..n]);
                for (t, &tok) in c.iter().enumerate() {
                    gather.rows.push(if t == 0 { p0 + lp - 1 } else { start + t - 1 });
                    gather.targets.push(tok);
                    gather.out_index.push(j * lmax + t);
                    mask[j * lmax + t] = 1.0;
                }
                j += 1;
            }
        }
        Ok((tokens, layout, gather, mask))
    }

    fn grouped_with(&self, groups: &[(&[u32], &[&[u32]])], grad: bool) -> Result<CompletionLogProbs> {
        let (tokens, layout, gather, mask) = self.grouped_inputs(groups)?;
        self.score(&tokens, layout, gather, mask, grad)
    }

    /// Log-probabilities of the tokens of independent sequences, each given the ones before it:
    /// `logprobs[j][t] = log p(seqs[j][t + 1] | seqs[j][..=t])`, shaped (b, Lmax - 1) and right-padded.
    pub fn sequence_logprobs(&self, seqs: &[&[u32]]) -> Result<CompletionLogProbs> {
        for s in seqs {
            self.check_tokens(s)?;
        }
        let b = seqs.len();
        let width = seqs.iter().map(|s| s.len().saturating_sub(1)).max().unwrap_or(0);
        let fed: Vec<usize> = seqs.iter().map(|s| s.len().saturating_sub(1)).collect();
        let mut tokens = Vec::with_capacity(fed.iter().sum());
        let mut gather = Gather { rows: vec![], targets: vec![], out_index: vec![], out_shape: vec![b, width], chunk_cols: 0 };
        let mut mask = vec![0f64; b * width];
        for (j, (s, &n)) in seqs.iter().zip(&fed).enumerate() {
            for t in 0..n {
                gather.rows.push(tokens.len() + t);
                gather.targets.push(s[t + 1]);
                gather.out_index.push(j * width + t);
                mask[j * width + t] = 1.0;
            }
            tokens.extend_from_slice(&s[..n]);
        }
        self.score(&tokens, AttnLayout::sequences(&fed), gather, mask, self.is_trainable())
    }

    fn score(&self, tokens: &[u32], layout: AttnLayout, gather: Gather, mask: Vec<f64>, grad: bool) -> Result<CompletionLogProbs> {
        let shape = gather.out_shape.clone();
        let mask = Tensor::from_vec(mask, shape.clone(), self.device())?.to_dtype(self.dtype())?;
        if gather.rows.is_empty() {
            let zeros = Tensor::zeros(shape, self.dtype(), self.device())?;
            return Ok(CompletionLogProbs { logprobs: zeros.clone(), mask, entropy: zeros, backward: None });
        }
        let out_index = gather.out_index.clone();
        let save = grad && self.is_trainable();
        if let Some(&p) = layout.positions.iter().max() {
            self.check_positions(p + 1)?;
        }
        // Dropout on the adapters' inputs acts in a pass that trains, never in a detached one.
        let dropout = if save { self.next_dropout_key() } else { None };
        let (raw, entropy, tape) = match self.dtype() {
            DType::F32 => with_ctx!(self, f32, |m| {
                let m = Ctx { dropout, ..m };
                let (s, t) = tape::forward(&m, tokens, layout, gather, save, self.temperature)?;
                (Tensor::from_vec(s.out, shape.clone(), self.device())?, s.entropy, t.map(|t| AnyTape::F32(held(t))))
            }),
            DType::F64 => with_ctx!(self, f64, |m| {
                let m = Ctx { dropout, ..m };
                let (s, t) = tape::forward(&m, tokens, layout, gather, save, self.temperature)?;
                (Tensor::from_vec(s.out, shape.clone(), self.device())?, s.entropy, t.map(|t| AnyTape::F64(held(t))))
            }),
            other => return Err(DecoderError::BadInput(format!("unsupported compute dtype {other:?}"))),
        };
        let mut ent = vec![0f64; raw.elem_count()];
        for (&o, &e) in out_index.iter().zip(&entropy) {
            ent[o] = e;
        }
        let entropy = Tensor::from_vec(ent, shape, self.device())?.to_dtype(self.dtype())?;
        let backward = tape.map(|t| Backward::new(self, t, raw.dims().to_vec()));
        Ok(CompletionLogProbs { logprobs: raw, mask, entropy, backward })
    }
}
