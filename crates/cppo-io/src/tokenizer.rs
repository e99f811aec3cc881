//! [`ChatTokenizer`]: the model's tokenizer (a `tokenizers` pipeline) together with its chat template and
//! special tokens, as one value the engine and trainer share across threads.

use std::collections::HashSet;

use crate::chat_template::{ChatMessage, ChatTemplate, SpecialTokens};
use crate::error::{ModelIoError, Result};

#[derive(Clone, Debug)]
pub struct ChatTokenizer {
    tokenizer: tokenizers::Tokenizer,
    template: Option<ChatTemplate>,
    special: SpecialTokens,
    eos_token_ids: Vec<u32>,
    special_ids: HashSet<u32>,
}

fn tok_error(origin: &str, detail: impl std::fmt::Display) -> ModelIoError {
    ModelIoError::Tokenizer {
        origin: origin.to_string(),
        detail: detail.to_string(),
    }
}

impl ChatTokenizer {
    /// `eos_token_ids` are stop ids beyond the eos token itself (e.g. `generation_config.json`'s); the eos
    /// token's id is always included. Every named special token must be in the vocabulary.
    pub fn new(
        tokenizer: tokenizers::Tokenizer,
        chat_template: Option<ChatTemplate>,
        special: SpecialTokens,
        eos_token_ids: &[u32],
    ) -> Result<Self> {
        let named = [
            ("bos_token", &special.bos_token),
            ("eos_token", &special.eos_token),
            ("pad_token", &special.pad_token),
            ("unk_token", &special.unk_token),
        ];
        for (key, token) in named {
            if let Some(token) = token {
                if tokenizer.token_to_id(token).is_none() {
                    return Err(tok_error(
                        key,
                        format!("`{token}` is not in the vocabulary"),
                    ));
                }
            }
        }
        let mut eos: Vec<u32> = Vec::new();
        let eos_token_id = special
            .eos_token
            .as_deref()
            .and_then(|t| tokenizer.token_to_id(t));
        for id in eos_token_ids.iter().copied().chain(eos_token_id) {
            if !eos.contains(&id) {
                eos.push(id);
            }
        }
        let special_ids = tokenizer
            .get_added_tokens_decoder()
            .into_iter()
            .filter(|(_, t)| t.special)
            .map(|(id, _)| id)
            .collect();
        Ok(ChatTokenizer {
            tokenizer,
            template: chat_template,
            special,
            eos_token_ids: eos,
            special_ids,
        })
    }

    /// Parses a `tokenizer.json`; `origin` labels errors.
    pub fn parse_tokenizer_json(json: &str, origin: &str) -> Result<tokenizers::Tokenizer> {
        json.parse::<tokenizers::Tokenizer>()
            .map_err(|e| tok_error(origin, e))
    }

    /// The chat as the model's template writes it, ending with the assistant header when asked.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        self.template()?
            .render(messages, add_generation_prompt, &self.special)
    }

    /// `render` with further template variables (e.g. `{"enable_thinking": false}` for Qwen3).
    pub fn render_with(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        extra: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String> {
        self.template()?
            .render_with(messages, add_generation_prompt, &self.special, extra)
    }

    fn template(&self) -> Result<&ChatTemplate> {
        self.template
            .as_ref()
            .ok_or_else(|| ModelIoError::Template {
                origin: "render".into(),
                detail: "this model has no chat template".into(),
            })
    }

    /// Token ids of `text`; special tokens written in the text become their ids, none is added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .tokenizer
            .encode_fast(text, false)
            .map_err(|e| tok_error("encode", e))?;
        Ok(encoding.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        self.tokenizer
            .decode(ids, skip_special)
            .map_err(|e| tok_error("decode", e))
    }

    /// Ids that end a generation: the eos token and any further stop ids the model declares.
    pub fn eos_token_ids(&self) -> &[u32] {
        &self.eos_token_ids
    }

    pub fn bos_token_id(&self) -> Option<u32> {
        self.special
            .bos_token
            .as_deref()
            .and_then(|t| self.token_to_id(t))
    }

    pub fn pad_token_id(&self) -> Option<u32> {
        self.special
            .pad_token
            .as_deref()
            .and_then(|t| self.token_to_id(t))
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.tokenizer.id_to_token(id)
    }

    /// Whether `id` is a special (control) token, which `decode(.., true)` drops.
    pub fn is_special(&self, id: u32) -> bool {
        self.special_ids.contains(&id)
    }

    /// Vocabulary size including added tokens (may be below the model's embedding rows, never above).
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    pub fn chat_template(&self) -> Option<&str> {
        self.template.as_ref().map(ChatTemplate::source)
    }

    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    /// The underlying `tokenizers` pipeline, for offsets, batching and the like.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.tokenizer
    }

    /// The pipeline as a `tokenizer.json` transformers and `tokenizers` load.
    pub fn to_tokenizer_json(&self) -> Result<String> {
        self.tokenizer
            .to_string(false)
            .map_err(|e| tok_error("serialise", e))
    }
}
