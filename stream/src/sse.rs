//! An incremental parser for `text/event-stream`, as the WHATWG HTML standard defines it
//! (§ 9.2.6 "Interpreting an event stream").
//!
//! Bytes go in as the network hands them over, in chunks of any size; events come out the
//! moment the line that completes them arrives. The parser keeps the unfinished line and
//! searches only the bytes that arrive after it, so a line split over many chunks costs time
//! linear in its length (each byte is examined once), and it never waits for a byte it does
//! not need: a lone CR ends a line immediately (see [`SseParser::feed`]).
//!
//! The parser knows nothing about clocks. Its caller stamps each chunk when the reader hands
//! it over and attributes the events a chunk dispatched to that chunk's timestamp.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event type: the last `event` field of the block, or `"message"` when none was given.
    pub event: String,
    /// The data buffer with its final LF removed: `data` lines joined by LF.
    pub data: String,
    /// The last event ID buffer at dispatch time (it persists across events).
    pub id: String,
}

/// What the stream asked of a reconnecting client (`retry` field); kept for completeness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamHints {
    /// "If the field value consists of only ASCII digits, then interpret the field value as
    /// an integer in base ten, and set the event stream's reconnection time to that integer."
    pub retry_ms: Option<u64>,
}

/// The longest line, and the largest data buffer of one event, the parser keeps. Past
/// either it stops: a stream that never ends a line (or an event) would otherwise grow
/// memory without bound.
pub const MAX_PENDING_BYTES: usize = 1 << 20;

/// What was left over when the stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamEnd {
    /// A line or an event grew past [`MAX_PENDING_BYTES`]; everything from there on was
    /// dropped unread.
    pub overflowed: bool,
    /// The stream ended inside an event: a line without its terminator, or field lines not
    /// followed by the blank line that dispatches them. "If the file ends in the middle of an
    /// event, before the final empty line, the incomplete event is not dispatched." A
    /// truncated answer is worth flagging, so the parser reports it instead of hiding it.
    pub unterminated: bool,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The incremental event-stream parser. Feed it with [`SseParser::feed`], end it with
/// [`SseParser::finish`]. `SseParser::default()` is [`SseParser::new`]: a parser at the
/// start of a stream, which strips a byte-order mark.
#[derive(Debug)]
pub struct SseParser {
    /// Bytes of the line being received. They have all been searched already and hold no
    /// terminator: lines are cut as soon as one arrives.
    line: Vec<u8>,
    /// The previous chunk ended with a CR: an LF at the start of the next chunk belongs to it.
    skip_lf: bool,
    /// No line has been completed yet: the first line may start with a BOM.
    at_stream_start: bool,
    /// The data buffer.
    data: String,
    /// Whether any `data` field was seen since the last dispatch (the buffer can hold "").
    has_data: bool,
    /// The event type buffer.
    event_type: String,
    /// The last event ID buffer.
    last_event_id: String,
    /// `retry` values seen.
    hints: StreamHints,
    /// A line or an event grew past [`MAX_PENDING_BYTES`]: the parser reads no more.
    overflowed: bool,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self {
            line: Vec::new(),
            skip_lf: false,
            at_stream_start: true,
            data: String::new(),
            has_data: false,
            event_type: String::new(),
            last_event_id: String::new(),
            hints: StreamHints::default(),
            overflowed: false,
        }
    }

    /// Reconnection hints the stream has sent so far.
    pub fn hints(&self) -> StreamHints {
        self.hints
    }

    /// Takes the next chunk of the stream and calls `on_event` for every event it completes,
    /// in order.
    ///
    /// "Lines must be separated by either a U+000D CARRIAGE RETURN U+000A LINE FEED (CRLF)
    /// character pair, a single U+000A LINE FEED (LF) character, or a single U+000D CARRIAGE
    /// RETURN (CR) character." A CR is taken as the end of a line the moment it arrives; an
    /// LF right after it, in this chunk or the next, is then skipped. Waiting for the next
    /// chunk to see whether an LF follows would dispatch the event late (a wrong TTFT) and,
    /// at the end of a stream, never.
    pub fn feed(&mut self, chunk: &[u8], mut on_event: impl FnMut(Event)) {
        if self.overflowed {
            return;
        }
        let mut rest = chunk;
        if self.skip_lf {
            if let Some((&b'\n', tail)) = rest.split_first() {
                rest = tail;
            }
            if !rest.is_empty() {
                self.skip_lf = false;
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            let (head, is_cr) = (&rest[..pos], rest[pos] == b'\r');
            rest = &rest[pos + 1..];
            if is_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            if self.line.len() + head.len() > MAX_PENDING_BYTES {
                self.overflow();
                return;
            }
            if self.line.is_empty() {
                // The usual case: the whole line is in this chunk, so no copy is needed.
                self.process_line(head, &mut on_event);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                self.process_line(&line, &mut on_event);
                line.clear();
                self.line = line; // keeps the allocation for the next split line
            }
            if self.data.len() > MAX_PENDING_BYTES {
                self.overflow();
                return;
            }
        }
        if self.line.len() + rest.len() > MAX_PENDING_BYTES {
            self.overflow();
            return;
        }
        self.line.extend_from_slice(rest);
    }

    /// Whether a line or an event outgrew [`MAX_PENDING_BYTES`].
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    fn overflow(&mut self) {
        self.overflowed = true;
        self.line = Vec::new();
        self.data = String::new();
        self.has_data = false;
    }

    /// Tells the parser the stream has ended and resets it. "Once the end of the file is
    /// reached, any pending data must be discarded": nothing is dispatched. Reports whether
    /// an event carrying data was pending, that is, whether the stream was cut inside one.
    pub fn finish(&mut self) -> StreamEnd {
        if self.overflowed {
            *self = Self::new();
            return StreamEnd {
                overflowed: true,
                unterminated: false,
            };
        }
        // A final line without its terminator is still a field of the pending event
        // (`data: [DONE]` with no newline). Processing a line dispatches only when the line
        // is empty, and then nothing is pending, so no event can escape here.
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            self.process_line(&line, &mut |_| {});
        }
        let unterminated = self.has_data;
        *self = Self::new();
        StreamEnd {
            unterminated,
            overflowed: false,
        }
    }

    /// Processes one complete line (without its terminator).
    fn process_line(&mut self, mut line: &[u8], on_event: &mut impl FnMut(Event)) {
        if self.at_stream_start {
            // "One leading U+FEFF BYTE ORDER MARK character must be ignored if any are present."
            // It can only precede the first line, and no line is processed before it is
            // complete, so a BOM split over chunks is still whole here.
            self.at_stream_start = false;
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        // "If the line is empty (a blank line): Dispatch the event."
        if line.is_empty() {
            self.dispatch(on_event);
            return;
        }
        // "If the line starts with a U+003A COLON character (:): Ignore the line."
        if line[0] == b':' {
            return;
        }
        // "If the line contains a U+003A COLON character: collect the characters on the line
        // before the first colon and let field be that string; collect the characters on the
        // line after the first colon and let value be that string. If value starts with a
        // U+0020 SPACE character, remove it from value. Otherwise, the string is not empty
        // but does not contain a colon: process the field using the whole line as the field
        // name, and the empty string as the field value."
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        // The stream is decoded as UTF-8 with replacement. Lines end only at CR or LF, which
        // never occur inside a multi-byte sequence, so decoding whole lines is exact even
        // when the network split a character.
        let value = String::from_utf8_lossy(value);
        match field {
            b"event" => self.event_type = value.into_owned(),
            b"data" => {
                // "Append the field value to the data buffer, then append a single U+000A
                // LINE FEED (LF) character to the data buffer."
                self.data.push_str(&value);
                self.data.push('\n');
                self.has_data = true;
            }
            // "If the field value does not contain U+0000 NULL, then set the last event ID
            // buffer to the field value. Otherwise, ignore the field."
            b"id" if !value.contains('\0') => self.last_event_id = value.into_owned(),
            // "If the field value consists of only ASCII digits, then interpret the field
            // value as an integer in base ten, and set the event stream's reconnection
            // time to that integer. Otherwise, ignore the field."
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.hints.retry_ms = value.parse().ok();
            }
            // "Otherwise: The field is ignored."
            _ => {}
        }
    }

    /// "When the user agent is required to dispatch the event": an event with an empty data
    /// buffer is not dispatched, and the data and event type buffers are reset either way.
    fn dispatch(&mut self, on_event: &mut impl FnMut(Event)) {
        let event_type = std::mem::take(&mut self.event_type);
        if !self.has_data {
            // "If the data buffer is an empty string, set the data buffer and the event type
            // buffer to the empty string and return."
            return;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        // "If the data buffer's last character is a U+000A LINE FEED (LF) character, then
        // remove the last character from the data buffer."
        if data.ends_with('\n') {
            data.pop();
        }
        on_event(Event {
            event: if event_type.is_empty() {
                "message".to_owned()
            } else {
                event_type
            },
            data,
            id: self.last_event_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> (Vec<Event>, StreamEnd) {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, |e| events.push(e));
        }
        let end = parser.finish();
        (events, end)
    }

    fn data_of(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn lone_cr_dispatches_without_waiting_for_more_bytes() {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        parser.feed(b"data: a\r\r", |e| events.push(e));
        assert_eq!(data_of(&events), ["a"]);
        // An LF arriving next belongs to the CR before it; it is not a second blank line.
        parser.feed(b"\ndata: b\n\n", |e| events.push(e));
        assert_eq!(data_of(&events), ["a", "b"]);
        assert!(!parser.finish().unterminated);
    }

    #[test]
    fn crlf_split_between_chunks_is_one_line_end() {
        let (events, end) = parse_all(&[b"data: a\r", b"\n", b"\r", b"\n"]);
        assert_eq!(data_of(&events), ["a"]);
        assert!(!end.unterminated);
    }

    #[test]
    fn an_empty_chunk_after_cr_keeps_the_pending_lf_skip() {
        let (events, _) = parse_all(&[b"data: a\r", b"", b"\ndata: b\r\n\r\n"]);
        // Had the empty chunk cleared the pending skip, the LF would count as a blank line
        // and dispatch "a" alone.
        assert_eq!(data_of(&events), ["a\nb"]);
    }

    #[test]
    fn bom_is_dropped_only_at_the_start_even_when_split() {
        let (events, _) = parse_all(&[b"\xEF", b"\xBB", b"\xBFdata: x\n\n"]);
        assert_eq!(data_of(&events), ["x"]);
        // A BOM later in the stream is part of the line: here it makes an unknown field.
        let (events, _) = parse_all(&[b"data: x\n\n\xEF\xBB\xBFdata: y\n\n"]);
        assert_eq!(data_of(&events), ["x"]);
    }

    #[test]
    fn a_default_parser_is_a_new_one_and_drops_the_bom() {
        let mut parser = SseParser::default();
        let mut events = Vec::new();
        parser.feed(b"\xEF\xBB\xBFdata: x\n\n", |e| events.push(e));
        assert_eq!(data_of(&events), ["x"]);
    }

    #[test]
    fn field_value_loses_one_leading_space_only() {
        let (events, _) = parse_all(&[b"data:x\n\ndata: x\n\ndata:  x\n\n"]);
        assert_eq!(data_of(&events), ["x", "x", " x"]);
    }

    #[test]
    fn event_type_and_id_follow_the_rules() {
        let (events, _) =
            parse_all(&[b"event: a\nid: 7\ndata: 1\n\ndata: 2\n\nid: bad\0id\ndata: 3\n\n"]);
        assert_eq!(events[0].event, "a");
        assert_eq!(events[0].id, "7");
        // The type resets after a dispatch; the last event ID persists.
        assert_eq!(events[1].event, "message");
        assert_eq!(events[1].id, "7");
        // An id containing NULL is ignored.
        assert_eq!(events[2].id, "7");
    }

    #[test]
    fn retry_takes_only_digits() {
        let mut parser = SseParser::new();
        parser.feed(b"retry: 2500\n\nretry: 1e3\n\n", |_| {});
        assert_eq!(parser.hints().retry_ms, Some(2500));
    }

    #[test]
    fn unterminated_final_event_is_reported_not_dispatched() {
        let (events, end) = parse_all(&[b"data: a\n\ndata: [DONE]"]);
        assert_eq!(data_of(&events), ["a"]);
        assert!(end.unterminated);
        let (events, end) = parse_all(&[b"data: a\n\ndata: b\n"]);
        assert_eq!(data_of(&events), ["a"]);
        assert!(end.unterminated);
        // A comment or a lone field without data is not an event, terminated or not.
        let (_, end) = parse_all(&[b"data: a\n\n: trailing comment"]);
        assert!(!end.unterminated);
        let (_, end) = parse_all(&[b"data: a\n\nevent: x\n"]);
        assert!(!end.unterminated);
    }

    #[test]
    fn multibyte_characters_split_across_chunks_survive() {
        let text = "data: 首字 🚀\n\n".as_bytes();
        for cut in 0..text.len() {
            let (events, _) = parse_all(&[&text[..cut], &text[cut..]]);
            assert_eq!(data_of(&events), ["首字 🚀"], "cut at {cut}");
        }
    }

    #[test]
    fn a_long_line_fed_byte_by_byte_is_parsed_in_linear_time() {
        // Almost 1 MiB (the most a line may hold) in one line, one byte per chunk: a parser
        // that rescans its buffer on every chunk does ~5·10^11 byte comparisons here and
        // would not finish in any sane time.
        const LEN: usize = MAX_PENDING_BYTES - 16;
        let mut stream = b"data: ".to_vec();
        stream.extend(std::iter::repeat_n(b'x', LEN));
        stream.extend_from_slice(b"\n\n");
        let mut parser = SseParser::new();
        let mut len = 0;
        for byte in stream.chunks(1) {
            parser.feed(byte, |e| len = e.data.len());
        }
        assert_eq!(len, LEN);
        assert!(!parser.overflowed());
    }

    #[test]
    fn a_line_past_the_limit_stops_the_parser() {
        let mut parser = SseParser::new();
        let mut events = 0;
        parser.feed(b"data: a\n\n", |_| events += 1);
        parser.feed(&vec![b'x'; MAX_PENDING_BYTES + 1], |_| events += 1);
        assert!(parser.overflowed());
        parser.feed(b"\n\ndata: b\n\n", |_| events += 1);
        assert_eq!(events, 1, "nothing after the overflow");
        let end = parser.finish();
        assert!(end.overflowed);
    }
}
