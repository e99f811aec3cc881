//! The tokenizer of a Hugging Face directory: `tokenizer.json`, plus the special tokens and chat template of
//! `tokenizer_config.json` (or `chat_template.jinja`, which transformers 5 writes and prefers).

use std::path::Path;

use serde_json::Value;

use crate::chat_template::{ChatTemplate, SpecialTokens};
use crate::error::{ModelIoError, Result};
use crate::tokenizer::ChatTokenizer;

pub fn load_tokenizer_dir(dir: &Path, stop_ids: &[u32]) -> Result<ChatTokenizer> {
    let tokenizer_path = dir.join("tokenizer.json");
    let json = std::fs::read_to_string(&tokenizer_path)
        .map_err(|e| ModelIoError::io(&tokenizer_path, e))?;
    let tokenizer =
        ChatTokenizer::parse_tokenizer_json(&json, &tokenizer_path.display().to_string())?;

    let config_path = dir.join("tokenizer_config.json");
    let config: Value = match std::fs::read_to_string(&config_path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| ModelIoError::json(&config_path, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Null,
        Err(e) => return Err(ModelIoError::io(&config_path, e)),
    };
    let token = |key: &str| -> Result<Option<String>> {
        match config.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            // An AddedToken written out: {"content": "<s>", "lstrip": false, ...}
            Some(Value::Object(o)) => match o.get("content") {
                Some(Value::String(s)) => Ok(Some(s.clone())),
                _ => Err(ModelIoError::invalid(
                    &config_path,
                    format!("{key}.content"),
                    "expected a string",
                )),
            },
            Some(other) => Err(ModelIoError::invalid(
                &config_path,
                key,
                format!("expected a token string, found {other}"),
            )),
        }
    };
    let special = SpecialTokens {
        bos_token: token("bos_token")?,
        eos_token: token("eos_token")?,
        pad_token: token("pad_token")?,
        unk_token: token("unk_token")?,
    };

    let jinja_path = dir.join("chat_template.jinja");
    let template = match std::fs::read_to_string(&jinja_path) {
        Ok(source) => Some(ChatTemplate::new(
            source,
            &jinja_path.display().to_string(),
        )?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match chat_template_from_config(&config, &config_path)? {
                Some(source) => Some(ChatTemplate::new(
                    source,
                    &config_path.display().to_string(),
                )?),
                None => None,
            }
        }
        Err(e) => return Err(ModelIoError::io(&jinja_path, e)),
    };
    ChatTokenizer::new(tokenizer, template, special, stop_ids)
}

/// `chat_template` is a string, or a list of `{name, template}` of which "default" is the chat one.
fn chat_template_from_config(config: &Value, path: &Path) -> Result<Option<String>> {
    match config.get("chat_template") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(list)) => {
            let default = list
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some("default"));
            match default
                .and_then(|t| t.get("template"))
                .and_then(Value::as_str)
            {
                Some(s) => Ok(Some(s.to_string())),
                None => Err(ModelIoError::invalid(
                    path,
                    "chat_template",
                    "a list of templates without one named \"default\"",
                )),
            }
        }
        Some(other) => Err(ModelIoError::invalid(
            path,
            "chat_template",
            format!("expected a string or a list, found {other}"),
        )),
    }
}
