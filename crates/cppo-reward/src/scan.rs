//! Finding answer spans in free text: `<answer>` tags, `\boxed{}`, "answer is", inline math.
//!
//! All scans are single passes (or a constant number of them) over the text, so a 1 MB completion full of
//! unclosed `\boxed{` costs linear time, never quadratic.

/// The content of the last complete `<tag>...</tag>` pair: the last closing tag and the last opening tag
/// before it. A trailing unclosed `<tag>` (a truncated completion) does not hide an earlier complete pair.
pub fn last_tag_content<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let end = text.rfind(&close)?;
    let start = text[..end].rfind(&open)? + open.len();
    Some(&text[start..end])
}

/// The content of the last complete `\boxed{...}` / `\fbox{...}` (braces may nest), or of `\boxed X`
/// (a box without braces, as in `\boxed 5`: the run of characters up to whitespace or `$`).
/// Empty boxes are ignored. "Last" means the box that starts last; in `\boxed{\boxed{5}}` that is the
/// inner one, which has the same content that matters.
pub fn last_boxed(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut best: Option<(usize, usize, usize)> = None; // (start of command, content start, content end)
    // Open braces not yet closed: (position, start of the box command it opens, if it opens one).
    let mut stack: Vec<(usize, Option<usize>)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                let name_start = i + 1;
                let mut j = name_start;
                while j < bytes.len() && bytes[j].is_ascii_alphabetic() {
                    j += 1;
                }
                let name = &text[name_start..j];
                if name == "boxed" || name == "fbox" {
                    let mut k = j;
                    while k < bytes.len() && (bytes[k] == b' ' || bytes[k] == b'\t') {
                        k += 1;
                    }
                    if k < bytes.len() && bytes[k] == b'{' {
                        stack.push((k, Some(i)));
                        i = k + 1;
                        continue;
                    }
                    if k > j {
                        // `\boxed 5`: a bare run up to whitespace or a math delimiter.
                        let mut e = k;
                        while e < bytes.len() && !bytes[e].is_ascii_whitespace() && bytes[e] != b'$' {
                            e += 1;
                        }
                        let content = text[k..e].trim_end_matches(['.', ',']);
                        if !content.is_empty() {
                            best = Some((i, k, k + content.len()));
                        }
                        i = e;
                        continue;
                    }
                    i = j;
                    continue;
                }
                // A control symbol such as `\{` or `\\` is one token: skip its character.
                i = if j == name_start { name_start + 1 } else { j };
            }
            b'{' => {
                stack.push((i, None));
                i += 1;
            }
            b'}' => {
                if let Some((open, Some(cmd))) = stack.pop() {
                    let content = &text[open + 1..i];
                    if !content.trim().is_empty() && best.is_none_or(|(s, _, _)| cmd > s) {
                        best = Some((cmd, open + 1, i));
                    }
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    best.map(|(_, s, e)| text[s..e].trim())
}

/// A math span delimited by `$...$`, `$$...$$`, `\(...\)` or `\[...\]`: the content of the last one.
/// An escaped `\$` is a dollar sign, not a delimiter.
pub fn last_inline_math(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut last: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            let close = match bytes[i + 1] {
                b'(' => Some(b')'),
                b'[' => Some(b']'),
                _ => None,
            };
            if let Some(close) = close {
                let start = i + 2;
                let mut j = start;
                let mut found = None;
                while j + 1 < bytes.len() {
                    if bytes[j] == b'\\' && bytes[j + 1] == close {
                        found = Some(j);
                        break;
                    }
                    j += 1;
                }
                match found {
                    Some(end) => {
                        last = Some((start, end));
                        i = end + 2;
                    }
                    None => return last_span(text, last),
                }
                continue;
            }
            i += 2;
            continue;
        }
        if bytes[i] == b'$' {
            let double = i + 1 < bytes.len() && bytes[i + 1] == b'$';
            let start = i + if double { 2 } else { 1 };
            let mut j = start;
            let mut found = None;
            while j < bytes.len() {
                if bytes[j] == b'\\' {
                    j += 2;
                    continue;
                }
                if bytes[j] == b'$' {
                    found = Some(j);
                    break;
                }
                j += 1;
            }
            match found {
                Some(end) => {
                    last = Some((start, end));
                    i = end + if double && end + 1 < bytes.len() && bytes[end + 1] == b'$' { 2 } else { 1 };
                }
                None => return last_span(text, last),
            }
            continue;
        }
        i += 1;
    }
    last_span(text, last)
}

fn last_span(text: &str, span: Option<(usize, usize)>) -> Option<&str> {
    span.map(|(s, e)| text[s..e].trim()).filter(|s| !s.is_empty())
}

/// What follows the last "answer is" / "answer:" (any case): the math span that starts right there, or
/// else the rest of that line without a final full stop.
pub fn after_answer_phrase(text: &str) -> Option<&str> {
    let lower = text.to_ascii_lowercase();
    let mut best: Option<usize> = None;
    for phrase in ["answer is", "answer:"] {
        if let Some(p) = lower.rfind(phrase) {
            let end = p + phrase.len();
            if best.is_none_or(|b| end > b) {
                best = Some(end);
            }
        }
    }
    let rest = text[best?..].trim_start_matches([' ', '\t', ':']);
    if rest.starts_with('$') || rest.starts_with("\\(") || rest.starts_with("\\[") {
        // The first span of the rest is the answer; find it by scanning only up to the end of that span.
        let line_end = first_span_end(rest);
        if let Some(inner) = last_inline_math(&rest[..line_end]) {
            return Some(inner);
        }
    }
    let line = rest.lines().next().unwrap_or("").trim();
    let line = line.trim_end_matches('.').trim();
    (!line.is_empty()).then_some(line)
}

/// Where the first math span of `s` (which starts with a delimiter) ends, or `s.len()`.
fn first_span_end(s: &str) -> usize {
    let (close, skip) = if s.starts_with("$$") {
        ("$$", 2)
    } else if s.starts_with('$') {
        ("$", 1)
    } else if s.starts_with("\\(") {
        ("\\)", 2)
    } else {
        ("\\]", 2)
    };
    let bytes = s.as_bytes();
    let mut j = skip;
    while j < s.len() {
        if s[j..].starts_with(close) && !(close == "$" && j > 0 && bytes[j - 1] == b'\\') {
            return j + close.len();
        }
        j += 1;
        while j < s.len() && !s.is_char_boundary(j) {
            j += 1;
        }
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_take_the_last_complete_pair() {
        assert_eq!(last_tag_content("<answer>1</answer> x <answer>2</answer>", "answer"), Some("2"));
        assert_eq!(last_tag_content("<answer>1</answer> then <answer>2", "answer"), Some("1"));
        assert_eq!(last_tag_content("no tags", "answer"), None);
        assert_eq!(last_tag_content("</answer><answer>", "answer"), None);
    }

    #[test]
    fn boxes_nest_and_the_last_wins() {
        assert_eq!(last_boxed(r"so \boxed{\frac{1}{2}} and \boxed{x^{2}}."), Some("x^{2}"));
        assert_eq!(last_boxed(r"\boxed{\left( 3, \frac{\pi}{2} \right)}"), Some(r"\left( 3, \frac{\pi}{2} \right)"));
        assert_eq!(last_boxed(r"is $\boxed 2$."), Some("2"));
        assert_eq!(last_boxed(r"= \boxed 9."), Some("9"));
        assert_eq!(last_boxed(r"\fbox{7}"), Some("7"));
        assert_eq!(last_boxed(r"\boxed{3} then \boxed{4"), Some("3"));
        assert_eq!(last_boxed(r"\boxed{} \boxed{ }"), None);
        assert_eq!(last_boxed(r"\boxed{\{1,2\}}"), Some(r"\{1,2\}"));
        assert_eq!(last_boxed(r"\boxedx{3}"), None);
        assert_eq!(last_boxed("none"), None);
    }

    #[test]
    fn inline_math_spans() {
        assert_eq!(last_inline_math(r"we get $x=1$ and so $\frac12$."), Some(r"\frac12"));
        assert_eq!(last_inline_math(r"costs \$5 so \(y\)"), Some("y"));
        assert_eq!(last_inline_math(r"$$a$$ then \[b\]"), Some("b"));
        assert_eq!(last_inline_math(r"$a$ then $unclosed"), Some("a"));
        assert_eq!(last_inline_math("no math"), None);
    }

    #[test]
    fn answer_phrases() {
        assert_eq!(after_answer_phrase("So the answer is $\\frac{1}{2}$. Done $3$"), Some("\\frac{1}{2}"));
        assert_eq!(after_answer_phrase("The final answer is 18.\nThanks"), Some("18"));
        assert_eq!(after_answer_phrase("Answer: (B)"), Some("(B)"));
        assert_eq!(after_answer_phrase("nothing here"), None);
    }
}
