//! Stop strings over token streams: a stop string can span several tokens, so the check decodes a short
//! tail of the completion rather than single tokens.

/// Returns the byte offset where the first stop string begins in `text`, if any.
pub fn find_stop(text: &str, stops: &[String]) -> Option<(usize, usize)> {
    stops
        .iter()
        .enumerate()
        .filter_map(|(i, s)| text.find(s.as_str()).map(|at| (at, i)))
        .min()
}

/// How many trailing tokens to decode so that any stop string ending at the newest token is visible:
/// every token decodes to at least one byte (or a piece of a multi-byte character), so the longest stop
/// string's byte length plus a margin for partial characters suffices.
pub fn tail_tokens(stops: &[String]) -> usize {
    stops.iter().map(|s| s.len()).max().unwrap_or(0) + 4
}
