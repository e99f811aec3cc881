//! A model's own Jinja chat template, rendered the way transformers' `apply_chat_template` renders it:
//! `trim_blocks` + `lstrip_blocks`, Python string methods, `raise_exception`, `strftime_now` and a
//! `tojson` that writes Python's `json.dumps`.

pub mod pyjson;
pub mod strftime;

use std::sync::OnceLock;

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind};
use serde::{Deserialize, Serialize};

pub use cppo_core::ChatMessage;

use crate::error::{ModelIoError, Result};

/// The special-token strings a template may refer to (`bos_token`, ...), as tokenizer_config.json names them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecialTokens {
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    pub pad_token: Option<String>,
    pub unk_token: Option<String>,
}

const TEMPLATE_NAME: &str = "chat_template";

pub struct ChatTemplate {
    source: String,
    env: Environment<'static>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source", &self.source)
            .finish()
    }
}

impl Clone for ChatTemplate {
    fn clone(&self) -> Self {
        ChatTemplate::new(self.source.clone(), "clone")
            .expect("a template that compiled once compiles again")
    }
}

impl ChatTemplate {
    /// Compiles `source`; `origin` (a file name, "gguf metadata") only labels errors.
    pub fn new(source: impl Into<String>, origin: &str) -> Result<Self> {
        let source = source.into();
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned(TEMPLATE_NAME, without_generation_tags(&source))
            .map_err(|e| template_error(origin, &e))?;
        Ok(ChatTemplate { source, env })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        special: &SpecialTokens,
    ) -> Result<String> {
        self.render_with(
            messages,
            add_generation_prompt,
            special,
            &serde_json::Map::new(),
        )
    }

    /// `render` with further template variables, as `apply_chat_template(**kwargs)` passes them
    /// (e.g. Qwen3's `enable_thinking: false`); they override the defaults of the same name.
    pub fn render_with(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        special: &SpecialTokens,
        extra: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<String> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| template_error("render", &e))?;
        let mut ctx: std::collections::BTreeMap<&str, Value> = std::collections::BTreeMap::new();
        ctx.insert("messages", Value::from_serialize(messages));
        ctx.insert("add_generation_prompt", Value::from(add_generation_prompt));
        // transformers passes these explicitly as None when the caller gives none.
        ctx.insert("tools", Value::from(()));
        ctx.insert("documents", Value::from(()));
        let named = [
            ("bos_token", &special.bos_token),
            ("eos_token", &special.eos_token),
            ("pad_token", &special.pad_token),
            ("unk_token", &special.unk_token),
        ];
        for (name, token) in named {
            if let Some(token) = token {
                ctx.insert(name, Value::from(token.as_str()));
            }
        }
        for (name, value) in extra {
            ctx.insert(name.as_str(), Value::from_serialize(value));
        }
        template
            .render(ctx)
            .map_err(|e| template_error("render", &e))
    }
}

fn template_error(origin: &str, e: &Error) -> ModelIoError {
    // `{:#}` adds minijinja's pointer into the template source.
    ModelIoError::Template {
        origin: origin.to_string(),
        detail: format!("{e:#}"),
    }
}

/// `{% generation %}` marks assistant text for transformers' loss masks; it renders its body unchanged.
fn without_generation_tags(source: &str) -> String {
    static TAG: OnceLock<regex::Regex> = OnceLock::new();
    let tag = TAG.get_or_init(|| {
        regex::Regex::new(r"\{%-?\s*(?:end)?generation\s*-?%\}")
            .expect("a valid regular expression")
    });
    tag.replace_all(source, "").into_owned()
}

fn raise_exception(message: String) -> std::result::Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

fn strftime_now(format: String) -> String {
    strftime::format(&strftime::now(), &format)
}

fn tojson(value: Value, kwargs: Kwargs) -> std::result::Result<Value, Error> {
    let mut style = pyjson::PyJsonStyle::default();
    if let Some(indent) = kwargs.get::<Option<usize>>("indent")? {
        style.indent = Some(indent);
    }
    if let Some(sort) = kwargs.get::<Option<bool>>("sort_keys")? {
        style.sort_keys = sort;
    }
    if let Some(ascii) = kwargs.get::<Option<bool>>("ensure_ascii")? {
        style.ensure_ascii = ascii;
    }
    if let Some(seps) = kwargs.get::<Option<Vec<String>>>("separators")? {
        match seps.as_slice() {
            [item, key] => style.separators = Some((item.clone(), key.clone())),
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: separators must be a pair (item_separator, key_separator)",
                ))
            }
        }
    }
    kwargs.assert_all_used()?;
    // Safe: JSON text goes into a prompt, never into HTML, and must not be escaped again.
    Ok(Value::from_safe_string(pyjson::dumps(&value, &style)?))
}
