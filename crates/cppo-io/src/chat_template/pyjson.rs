//! `json.dumps` as Python writes it: chat templates embed tool schemas with `tojson`, and the model was
//! trained on Python's spelling (`{"a": 1, "b": [1, 2]}`, `1e-05`, `1.0`), not on serde_json's.

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

#[derive(Clone, Debug)]
pub struct PyJsonStyle {
    pub indent: Option<usize>,
    pub sort_keys: bool,
    pub ensure_ascii: bool,
    /// `(item, key)` separators; Python's default is `(", ", ": ")`, or `(",", ": ")` with an indent.
    pub separators: Option<(String, String)>,
}

impl Default for PyJsonStyle {
    /// transformers' `tojson`: `ensure_ascii=False`, no indent.
    fn default() -> Self {
        PyJsonStyle {
            indent: None,
            sort_keys: false,
            ensure_ascii: false,
            separators: None,
        }
    }
}

pub fn dumps(value: &Value, style: &PyJsonStyle) -> Result<String, Error> {
    let (item_sep, key_sep) = match &style.separators {
        Some((i, k)) => (i.clone(), k.clone()),
        None if style.indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
    };
    let mut out = String::new();
    Writer {
        style,
        item_sep: &item_sep,
        key_sep: &key_sep,
        out: &mut out,
    }
    .value(value, 0)?;
    Ok(out)
}

struct Writer<'a> {
    style: &'a PyJsonStyle,
    item_sep: &'a str,
    key_sep: &'a str,
    out: &'a mut String,
}

impl Writer<'_> {
    fn value(&mut self, v: &Value, depth: usize) -> Result<(), Error> {
        match v.kind() {
            ValueKind::None => self.out.push_str("null"),
            ValueKind::Bool => self
                .out
                .push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => self.number(v)?,
            ValueKind::String => string(
                v.as_str().unwrap_or_default(),
                self.style.ensure_ascii,
                self.out,
            ),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = v.try_iter()?.collect();
                self.open_close('[', ']', items.len(), depth, |w, i, d| {
                    w.value(&items[i], d)
                })?;
            }
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter()?.collect();
                if self.style.sort_keys {
                    keys.sort_by_key(|k| k.to_string());
                }
                self.open_close('{', '}', keys.len(), depth, |w, i, d| {
                    let key = &keys[i];
                    let key_text = match key.kind() {
                        ValueKind::String => key.as_str().unwrap_or_default().to_string(),
                        _ => key.to_string(),
                    };
                    string(&key_text, w.style.ensure_ascii, w.out);
                    w.out.push_str(w.key_sep);
                    w.value(&v.get_item(key)?, d)
                })?;
            }
            ValueKind::Undefined => {
                return Err(Error::new(
                    ErrorKind::UndefinedError,
                    "tojson of an undefined value",
                ))
            }
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson cannot serialise a value of kind {other}"),
                ))
            }
        }
        Ok(())
    }

    fn open_close(
        &mut self,
        open: char,
        close: char,
        len: usize,
        depth: usize,
        mut item: impl FnMut(&mut Self, usize, usize) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.out.push(open);
        if len == 0 {
            self.out.push(close);
            return Ok(());
        }
        for i in 0..len {
            if i > 0 {
                self.out.push_str(self.item_sep);
            }
            self.newline(depth + 1);
            item(self, i, depth + 1)?;
        }
        self.newline(depth);
        self.out.push(close);
        Ok(())
    }

    fn newline(&mut self, depth: usize) {
        if let Some(indent) = self.style.indent {
            self.out.push('\n');
            self.out.extend(std::iter::repeat_n(' ', indent * depth));
        }
    }

    fn number(&mut self, v: &Value) -> Result<(), Error> {
        if v.is_integer() {
            // i128 covers every integer minijinja holds; Display gives Python's digits.
            let n = i128::try_from(v.clone())?;
            self.out.push_str(&n.to_string());
        } else {
            let f = f64::try_from(v.clone())?;
            self.out.push_str(&python_float_repr(f));
        }
        Ok(())
    }
}

/// Python's `repr(float)`: shortest round-trip digits, positional for exponents in [-4, 16), else
/// `d.ddde±XX`; `json.dumps` writes non-finite values as `NaN` / `Infinity`.
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // `{:e}` gives the shortest round-trip digits as `d.ddde<exp>`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` always has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat((-point) as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            let (int, frac) = digits.split_at(point as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exp.abs())
    }
}

fn string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ensure_ascii && !c.is_ascii()) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
