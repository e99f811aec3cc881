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
    last_boxed_counting(text).0
}

/// [`last_boxed`], and how many box commands the text holds (complete or not), so that a caller can
/// tell whether [`trailing_boxes`] could find several without scanning again.
pub fn last_boxed_counting(text: &str) -> (Option<&str>, usize) {
    let bytes = text.as_bytes();
    let mut commands = 0usize;
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
                    commands += 1;
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
    (best.map(|(_, s, e)| text[s..e].trim()), commands)
}

/// Longest text between two boxes that can still join them into one answer.
const MAX_CONNECTOR_BYTES: usize = 80;

/// Most words about a box (a unit, a label such as `for part (a)`) between it and the connective that
/// joins it to the next box.
const MAX_LABEL_WORDS: usize = 4;

/// The boxes that end the text together, in order, when there are several: the last box and the boxes
/// before it that only connecting text separates from it (`\boxed{-2} and \boxed{1}`,
/// `$x = \boxed{3}$ or $x = \boxed{-5}$`, `\boxed{1}\boxed{2}`). Connecting text is punctuation
/// (`,` `;`), `and`, `or`, math delimiters, spacing, `\text{}` around those, and a short name with `=`
/// right before a box; a few words about the box before may precede the connective (`\boxed{1} papers
/// and \boxed{2}`, `\boxed{a} for part (a) and \boxed{b}`). Other prose between two boxes
/// (`First \boxed{3}. Then \boxed{4}`, `\boxed{5} or maybe \boxed{6}`) separates them.
/// Boxes inside other boxes are not counted. Empty when fewer than two boxes end the text together, or
/// when more than `max_boxes` do or their contents exceed `max_bytes` in all.
pub fn trailing_boxes(text: &str, max_boxes: usize, max_bytes: usize) -> Vec<&str> {
    // Most texts hold one box: a substring search rules them out without the full scan.
    let commands = text.matches("\\boxed").take(2).count() + text.matches("\\fbox").take(2).count();
    if commands < 2 {
        return Vec::new();
    }
    let boxes = outer_boxes(text);
    let Some(&(mut start, s, e)) = boxes.last() else { return Vec::new() };
    let mut group = vec![text[s..e].trim()];
    let mut bytes = e - s;
    for &(cmd, s, e) in boxes.iter().rev().skip(1) {
        // `e` is where the content ends; a braced box's closing brace follows it.
        let close = if text[e..].starts_with('}') { e + 1 } else { e };
        if close > start || !connects(&text[close..start]) {
            break;
        }
        bytes += e - s;
        if group.len() == max_boxes || bytes > max_bytes {
            return Vec::new();
        }
        group.push(text[s..e].trim());
        start = cmd;
    }
    if group.len() < 2 {
        return Vec::new();
    }
    group.reverse();
    group
}

/// Every complete, non-empty box that is not inside another box, in order: (command start, content
/// start, content end). One pass, like [`last_boxed`].
fn outer_boxes(text: &str) -> Vec<(usize, usize, usize)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    // Open braces not yet closed: (position, start of the box command it opens, if it opens one).
    let mut stack: Vec<(usize, Option<usize>)> = Vec::new();
    let mut open_boxes = 0usize;
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
                        open_boxes += 1;
                        i = k + 1;
                        continue;
                    }
                    if k > j {
                        let mut e = k;
                        while e < bytes.len() && !bytes[e].is_ascii_whitespace() && bytes[e] != b'$' {
                            e += 1;
                        }
                        let content = text[k..e].trim_end_matches(['.', ',']);
                        if !content.is_empty() && open_boxes == 0 {
                            found.push((i, k, k + content.len()));
                        }
                        i = e;
                        continue;
                    }
                    i = j;
                    continue;
                }
                i = if j == name_start { name_start + 1 } else { j };
            }
            b'{' => {
                stack.push((i, None));
                i += 1;
            }
            b'}' => {
                if let Some((open, Some(cmd))) = stack.pop() {
                    open_boxes -= 1;
                    if open_boxes == 0 && !text[open + 1..i].trim().is_empty() {
                        found.push((cmd, open + 1, i));
                    }
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    found
}

/// Whether the text between two boxes only joins them (see [`trailing_boxes`]).
fn connects(between: &str) -> bool {
    if between.len() > MAX_CONNECTOR_BYTES {
        return false;
    }
    let mut t = between.to_string();
    for filler in [r"\qquad", r"\quad", r"\textnormal{", r"\text{", r"\mbox{", r"\[", r"\]", r"\(", r"\)", r"\,", r"\;", r"\ ", r"\\", "$", "~", "{", "}", "&"] {
        t = t.replace(filler, " ");
    }
    // `$, $y = \boxed{7}`: a name right before the next box.
    if let Some(eq) = t.rfind('=') {
        let before = t[..eq].trim_end();
        let name_len = before.bytes().rev().take_while(|c| c.is_ascii_alphanumeric() || b"_^()'".contains(c)).count();
        if name_len == 0 || !t[eq + 1..].trim().is_empty() {
            return false;
        }
        t.truncate(before.len() - name_len);
    }
    // Up to MAX_LABEL_WORDS words about the box before (`papers`, `for part (a)`) may precede the
    // connective; nothing but connectives may follow it.
    let t = t.replace([',', ';'], " , ");
    let words: Vec<&str> = t.split_whitespace().collect();
    let is_connective = |w: &&str| matches!(*w, "," | "and" | "or");
    let labels = words.iter().take_while(|w| !is_connective(w)).count();
    if labels == 0 {
        return words.iter().all(is_connective);
    }
    let is_label = |w: &&str| w.chars().all(|c| c.is_ascii_alphabetic() || "()'".contains(c));
    labels <= MAX_LABEL_WORDS
        && labels < words.len()
        && words[..labels].iter().all(is_label)
        && words[labels..].iter().all(is_connective)
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
/// else the rest of that sentence: up to the end of the line or a full stop followed by a space ("The
/// final answer is 120. I hope it is correct." gives `120`), without Markdown emphasis (`**42**`).
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
    let rest = text[best?..].trim_start_matches([' ', '\t', ':', '*']);
    if rest.starts_with('$') || rest.starts_with("\\(") || rest.starts_with("\\[") {
        // The first span of the rest is the answer; find it by scanning only up to the end of that span.
        let line_end = first_span_end(rest);
        if let Some(inner) = last_inline_math(&rest[..line_end]) {
            return Some(inner);
        }
    }
    let line = rest.lines().next().unwrap_or("");
    let line = line[..sentence_end(line)].trim().trim_matches('*').trim();
    let line = line.trim_end_matches('.').trim();
    (!line.is_empty()).then_some(line)
}

/// Verbs after which a final sentence states its value: "the largest $n$ is 34", "there are 12 ways".
const COPULAS: &[&str] = &["is", "are", "was", "were", "equals"];

/// The value a prose sentence states (the text after "answer is" when that is a sentence whose subject
/// is something else): after its last copula ([`COPULAS`], outside math), a math span or a number
/// (`-12`, `1,000`, `1 000`, `3.5`, `7/2`) followed only by words (`ways`, `square units`). `None` when
/// no copula is followed by a value (`not 34`, `the answer`), two are (`x is 5 or x is 7`), or the rest
/// holds another number (`3 more than 31`): then the sentence is not reduced.
pub fn sentence_value(sentence: &str) -> Option<&str> {
    let b = sentence.as_bytes();
    let copulas = prose_bytes(sentence).filter(|&(_, c)| c == b' ').filter_map(|(i, _)| {
        let word_end = b[i + 1..].iter().position(|&c| c == b' ').map_or(b.len(), |p| i + 1 + p);
        COPULAS.contains(&&sentence[i + 1..word_end]).then_some(word_end)
    });
    // Two copulas each followed by a value (`x is 5 or x is 7`) state two answers: no reduction.
    let mut valued = copulas.filter(|&end| starts_with_value(sentence[end..].trim_start()));
    let after_copula = valued.next()?;
    if valued.next().is_some() {
        return None;
    }
    let rest = sentence[after_copula..].trim_start();
    let (value, tail) = if rest.starts_with('$') || rest.starts_with("\\(") {
        let end = first_span_end(rest);
        (last_inline_math(&rest[..end])?, &rest[end..])
    } else {
        let end = leading_number(rest)?;
        (&rest[..end], &rest[end..])
    };
    let words_only = tail.bytes().all(|c| !(c.is_ascii_digit() || c == b'$' || c == b'\\' || c == b'='));
    words_only.then_some(value)
}

fn starts_with_value(s: &str) -> bool {
    s.starts_with('$') || s.starts_with("\\(") || leading_number(s).is_some()
}

/// The length of the number that starts `s`: an optional minus, digits in groups (`1,000`, `1 000`), a
/// decimal part, and a `/` denominator.
fn leading_number(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let digits = |from: usize| b[from.min(b.len())..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut end = usize::from(b.first() == Some(&b'-'));
    let first = digits(end);
    if first == 0 {
        return None;
    }
    end += first;
    // A group ends the number or is followed by a space or punctuation: `3 100-dollar bills` is two.
    let group_ends = |at: usize| b.get(at).is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'-'));
    while matches!(b.get(end), Some(b',' | b' ')) && digits(end + 1) == 3 && group_ends(end + 4) && first <= 3 {
        end += 4;
    }
    for sep in [b'.', b'/'] {
        if b.get(end) == Some(&sep) && digits(end + 1) > 0 {
            end += 1 + digits(end + 1);
        }
    }
    Some(end)
}

/// Where the first sentence of `line` ends: at a full stop followed by whitespace, outside `$...$` and
/// braces (a decimal point is followed by a digit, so `3.5` goes on); else the whole line.
fn sentence_end(line: &str) -> usize {
    let b = line.as_bytes();
    prose_bytes(line).find(|&(i, c)| c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_whitespace)).map_or(b.len(), |(i, _)| i)
}

/// The bytes of `text` outside `$...$` and braces, with their positions; a backslash and the character
/// after it are passed over (an escaped `\$` or `\{` delimits nothing).
fn prose_bytes(text: &str) -> impl Iterator<Item = (usize, u8)> + '_ {
    let b = text.as_bytes();
    let (mut depth, mut in_math, mut i) = (0usize, false, 0usize);
    std::iter::from_fn(move || {
        while i < b.len() {
            let (at, c) = (i, b[i]);
            i += 1;
            match c {
                b'\\' => i += 1,
                b'{' => depth += 1,
                b'}' => depth = depth.saturating_sub(1),
                b'$' => in_math = !in_math,
                _ if depth == 0 && !in_math => return Some((at, c)),
                _ => {}
            }
        }
        None
    })
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
    fn boxes_that_end_the_text_together() {
        fn group(s: &str) -> Vec<&str> {
            trailing_boxes(s, 16, 4096)
        }
        assert_eq!(group(r"The integers are \boxed{-2} and \boxed{1}."), ["-2", "1"]);
        assert_eq!(group(r"$\boxed{1}\boxed{2}$"), ["1", "2"]);
        assert_eq!(group(r"so $x = \boxed{3}$ or $x = \boxed{-5}$."), ["3", "-5"]);
        assert_eq!(group(r"$a = \boxed{2}$, $b = \boxed{7}$, \text{and} $c = \boxed 9$"), ["2", "7", "9"]);
        assert_eq!(group(r"\boxed{1} \boxed{2} \boxed{3}").len(), 3);
        assert!(group(r"First \boxed{3}. Then we check it: \boxed{4}").is_empty());
        assert!(group(r"\boxed{5}").is_empty());
        assert!(group(r"\boxed{\boxed{5}}").is_empty());
        assert!(group(r"\boxed{3} x = 2 \boxed{4}").is_empty());
        assert_eq!(group(r"\boxed{1} papers and \boxed{2} bins"), ["1", "2"]);
        assert_eq!(group(r"\boxed{7} for part (a), and \boxed{9} for part (b)."), ["7", "9"]);
        assert!(group(r"\boxed{5} or maybe \boxed{6}").is_empty());
        assert!(group(r"\boxed{5} and then we add \boxed{6}").is_empty());
        assert!(group(r"\boxed{5} is far too large for the box and \boxed{6}").is_empty());
        assert!(group(r"\boxed{5} papers \boxed{6}").is_empty());
        assert!(trailing_boxes(r"\boxed{1} \boxed{2} \boxed{3}", 2, 4096).is_empty());
        assert!(trailing_boxes(r"\boxed{1} \boxed{2}", 4, 1).is_empty());
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
    fn values_stated_by_sentences() {
        assert_eq!(sentence_value("The largest $n$ is 34"), Some("34"));
        assert_eq!(sentence_value("Therefore, there are 12 distinct ways"), Some("12"));
        assert_eq!(sentence_value("the volume of the box is 1 200 cubic units"), Some("1 200"));
        assert_eq!(sentence_value(r"the ratio is $\frac{3}{4}$ exactly"), Some(r"\frac{3}{4}"));
        assert_eq!(sentence_value("the mean is -3.5"), Some("-3.5"));
        assert_eq!(sentence_value("the total is 3 more than 31"), None);
        assert_eq!(sentence_value("the largest $n$ is not 34"), None);
        assert_eq!(sentence_value("34 is the answer"), None);
        assert_eq!(sentence_value("there are 12 boxes and 5 balls"), None);
        assert_eq!(sentence_value(r"$x$ is 3 where $y = 2$"), None);
        assert_eq!(sentence_value("120"), None);
        assert_eq!(sentence_value("$k$ is 5 or $k$ is 7"), None);
        assert_eq!(sentence_value("the area is 6 and the perimeter is 12"), None);
        assert_eq!(sentence_value("the answer is the number of ways, which is 9"), Some("9"));
    }

    #[test]
    fn answer_phrases() {
        assert_eq!(after_answer_phrase("So the answer is $\\frac{1}{2}$. Done $3$"), Some("\\frac{1}{2}"));
        assert_eq!(after_answer_phrase("The final answer is 18.\nThanks"), Some("18"));
        assert_eq!(after_answer_phrase("Answer: (B)"), Some("(B)"));
        assert_eq!(after_answer_phrase("nothing here"), None);
        assert_eq!(after_answer_phrase("Final Answer: The final answer is 120. I hope it is correct."), Some("120"));
        assert_eq!(after_answer_phrase("The answer is 3.5. Done."), Some("3.5"));
        assert_eq!(after_answer_phrase("**Answer:** 42"), Some("42"));
        assert_eq!(after_answer_phrase("The final answer is: **17**"), Some("17"));
        assert_eq!(after_answer_phrase(r"The answer is \text{5 p. m. } then"), Some(r"\text{5 p. m. } then"));
    }
}
