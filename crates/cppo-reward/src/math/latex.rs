//! A LaTeX token tree: just enough structure (commands, brace groups) to normalise answers.

use crate::limits::MAX_DEPTH;

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// `\name` (letters only).
    Cmd(String),
    /// A control symbol: `\` followed by one non-letter (`\{`, `\%`, `\!`, `\\`, `\ `).
    Sym(char),
    Char(char),
    Space,
    /// `{...}`
    Group(Vec<Node>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeError {
    Unbalanced,
    TooDeep,
}

/// Parses LaTeX into nodes. Braces must balance; nesting is capped at [`MAX_DEPTH`].
pub fn parse(s: &str) -> Result<Vec<Node>, TreeError> {
    let chars: Vec<char> = s.chars().collect();
    let mut stack: Vec<Vec<Node>> = vec![Vec::new()];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let node = match c {
            '\\' => {
                let start = i + 1;
                let mut j = start;
                while j < chars.len() && chars[j].is_ascii_alphabetic() {
                    j += 1;
                }
                if j > start {
                    i = j;
                    Node::Cmd(chars[start..j].iter().collect())
                } else if start < chars.len() {
                    i = start + 1;
                    Node::Sym(chars[start])
                } else {
                    i = start;
                    Node::Char('\\')
                }
            }
            '{' => {
                if stack.len() > MAX_DEPTH {
                    return Err(TreeError::TooDeep);
                }
                stack.push(Vec::new());
                i += 1;
                continue;
            }
            '}' => {
                if stack.len() == 1 {
                    return Err(TreeError::Unbalanced);
                }
                let done = stack.pop().unwrap_or_default();
                i += 1;
                Node::Group(done)
            }
            c if c.is_whitespace() => {
                while i < chars.len() && chars[i].is_whitespace() {
                    i += 1;
                }
                Node::Space
            }
            c => {
                i += 1;
                Node::Char(c)
            }
        };
        if let Some(top) = stack.last_mut() {
            top.push(node);
        }
    }
    if stack.len() != 1 {
        return Err(TreeError::Unbalanced);
    }
    Ok(stack.pop().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_groups_and_symbols() {
        let t = parse(r"\frac{1}{2}\!\%x").unwrap();
        assert_eq!(
            t,
            vec![
                Node::Cmd("frac".into()),
                Node::Group(vec![Node::Char('1')]),
                Node::Group(vec![Node::Char('2')]),
                Node::Sym('!'),
                Node::Sym('%'),
                Node::Char('x'),
            ]
        );
    }

    #[test]
    fn unbalanced_and_deep_input_is_an_error() {
        assert_eq!(parse("{"), Err(TreeError::Unbalanced));
        assert_eq!(parse("}"), Err(TreeError::Unbalanced));
        assert_eq!(parse(&"{".repeat(MAX_DEPTH + 2)), Err(TreeError::TooDeep));
        assert!(parse(&format!("{}{}", "{".repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH))).is_ok());
    }
}
