//! Text a person reads: what characters a field may not hold, and how text from outside
//! (a server's error message, a label someone typed) is made fit to show.

/// Text a record can hold: control characters (a newline in a server's error message)
/// become spaces, characters that cannot be seen or that turn the text's direction
/// ([`is_hidden`]) are dropped, and at most `max_chars` characters are kept.
pub fn clean_text(text: &str, max_chars: usize) -> String {
    text.chars()
        .filter(|c| !is_hidden(*c))
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max_chars)
        .collect()
}

/// A character no reader sees, or one that turns the direction of the text after it:
/// zero-width spaces and joiners, the direction marks, embeddings, overrides and isolates,
/// the line and paragraph separators, the soft hyphen, the byte-order mark. With them a
/// group named `Chrome\u{200b}` looks like `Chrome` on the Results page, and `\u{202e}`
/// shows a label backwards; no field a person types or a browser reports needs one.
pub fn is_hidden(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{061c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
    )
}
