//! From a problem to the token ids the model sees: prompt template, then the model's own chat template.

use anyhow::{bail, Result};
use cppo_core::Problem;
use cppo_data::PromptTemplate;
use cppo_io::{ChatMessage, ChatTokenizer};

pub struct Prompter {
    pub template: PromptTemplate,
    pub max_prompt_tokens: usize,
}

impl Prompter {
    /// The template's messages, or the problem's own conversation as it is (no template).
    pub fn messages(&self, problem: &Problem) -> Vec<ChatMessage> {
        match &problem.messages {
            Some(conversation) => conversation.clone(),
            None => self.template.messages(problem),
        }
    }

    /// The prompt's token ids, rendered with `add_generation_prompt`. Too long a prompt is an error that
    /// says which problem and what to change.
    pub fn ids(&self, tokenizer: &ChatTokenizer, problem: &Problem) -> Result<Vec<u32>> {
        let text = tokenizer.render(&self.messages(problem), true)?;
        let ids = tokenizer.encode(&text)?;
        if ids.len() > self.max_prompt_tokens {
            bail!(
                "problem {}: the prompt is {} tokens, over data.max_prompt_tokens = {}; raise the limit or shorten the template",
                problem.id,
                ids.len(),
                self.max_prompt_tokens
            );
        }
        Ok(ids)
    }
}
