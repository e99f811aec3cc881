//! GGUF tensor names to Hugging Face names, and undoing llama.cpp's reordering of Llama's q/k rows.

use candle_core::Tensor;

use crate::error::Result;

/// The Hugging Face name of a llama.cpp tensor name, or `None` for a name this crate does not know.
pub fn hf_name(gguf: &str) -> Option<String> {
    crate::params::kind_of_gguf_name(gguf).map(|k| k.name())
}

/// llama.cpp's converter reorders each head's rows of Llama's q and k projections from Hugging Face's
/// "first half / second half" rotary layout to GGML's interleaved pairs: within a head of `2 * half` rows,
/// HF row `j * half + i` becomes GGUF row `2 * i + j`. This undoes it (rows are the first dimension; works
/// for weights `[rows, in]` and biases `[rows]`). `n_head` is the number of heads these rows hold.
pub fn reverse_llama_rotary_permutation(t: &Tensor, n_head: usize) -> Result<Tensor> {
    let name = "q/k projection";
    let dims = t.dims().to_vec();
    let rows = dims.first().copied().unwrap_or(0);
    if n_head == 0 || rows == 0 || rows % (2 * n_head) != 0 {
        return Err(crate::error::ModelIoError::tensor(
            name,
            candle_core::Error::Msg(format!(
                "{rows} rows do not split into {n_head} heads of pairs"
            )),
        ));
    }
    let half = rows / n_head / 2;
    let rest: Vec<usize> = dims[1..].to_vec();
    let mut split = vec![n_head, half, 2];
    split.extend(&rest);
    t.reshape(split)
        .and_then(|x| x.transpose(1, 2))
        .and_then(|x| x.contiguous())
        .and_then(|x| x.reshape(dims))
        .map_err(|e| crate::error::ModelIoError::tensor(name, e))
}
