//! Stream dialects: how an LLM endpoint's events carry answer text, reasoning, tool calls,
//! token usage, errors, the end of the stream and the server's own timing breakdown.
//!
//! A dialect looks at one dispatched [`Event`] at a time and says what it carried
//! ([`Decoded`]). It never decides timing: the caller knows which stamped network chunk
//! completed the event.
//!
//! What is *not* a token matters as much as what is: a role-only first chunk, an empty or
//! `null` content, a keep-alive comment, a ping and a usage-only chunk carry no answer
//! text, and counting any of them as the first token makes TTFT look better than what the
//! user saw.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::sse::Event;

mod anthropic;
mod custom;
mod openai;

use anthropic::decode_anthropic;
use custom::decode_custom;
use openai::{decode_openai_chat, decode_openai_responses};

/// The stream formats firsttoken understands. In JSON a plain dialect is its name
/// (`"openai-chat"`); a custom one is `{"custom": {...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// OpenAI chat completions (`chat.completion.chunk` events, `data: [DONE]`), also spoken
    /// by OpenRouter, vLLM, DeepSeek and most OpenAI-compatible gateways.
    #[default]
    OpenaiChat,
    /// OpenAI Responses API (`response.output_text.delta` … `response.completed`).
    OpenaiResponses,
    /// Anthropic Messages (`content_block_delta` … `message_stop`).
    Anthropic,
    /// An app's own event stream: which event carries text where, and which ends it.
    Custom(CustomDialect),
    /// Plain text: every event with a non-empty data payload is one chunk of answer text.
    Text,
}

/// An app's own stream format, described by event names and JSON pointers (RFC 6901).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomDialect {
    /// The event type that carries answer text (`"message"` for events without `event:`).
    pub token_event: String,
    /// Where the text is inside that event's JSON data (`/t`, `/choices/0/text`).
    pub token_pointer: String,
    /// The event type that ends the stream, if it has one.
    #[serde(default)]
    pub done_event: Option<String>,
    /// Where the server's timing breakdown is inside the done event's data.
    #[serde(default)]
    pub timings_pointer: Option<String>,
    /// Where an error object sits in an event's JSON data (`/error`): any event, of any
    /// type, whose data has something there reports a stream error (its `message`, or
    /// the value itself). Events whose data is not JSON are not looked at.
    #[serde(default)]
    pub error_pointer: Option<String>,
}

/// What is wrong with a custom format's description: the field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct DescriptionError {
    pub field: &'static str,
    pub message: String,
}

impl DescriptionError {
    fn new(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            field,
            message: message.into(),
        }
    }
}

impl CustomDialect {
    /// Checks the names and pointers; the error names the field.
    pub fn validate(&self) -> Result<(), DescriptionError> {
        let name = |field: &'static str, value: &str| {
            if value.is_empty()
                || value.len() > 64
                || value.chars().any(|c| c.is_control() || c == ' ')
            {
                Err(DescriptionError::new(
                    field,
                    format!("{value:?} is not an event name (1–64 characters, no spaces)"),
                ))
            } else {
                Ok(())
            }
        };
        let pointer = |field: &'static str, value: &str| {
            if value.len() > 256 || !(value.is_empty() || value.starts_with('/')) {
                Err(DescriptionError::new(
                    field,
                    format!("{value:?} is not a JSON pointer: it must be empty or start with /"),
                ))
            } else {
                Ok(())
            }
        };
        name("token_event", &self.token_event)?;
        pointer("token_pointer", &self.token_pointer)?;
        if let Some(done) = &self.done_event {
            name("done_event", done)?;
        }
        if let Some(timings) = &self.timings_pointer {
            pointer("timings_pointer", timings)?;
        }
        if let Some(error) = &self.error_pointer {
            pointer("error_pointer", error)?;
            if error.is_empty() {
                return Err(DescriptionError::new(
                    "error_pointer",
                    "must point inside the event's data (start with /)",
                ));
            }
        }
        Ok(())
    }
}

impl Dialect {
    /// The dialects that need no further description, in the order a user picks from.
    pub const PLAIN: [Dialect; 4] = [
        Dialect::OpenaiChat,
        Dialect::OpenaiResponses,
        Dialect::Anthropic,
        Dialect::Text,
    ];

    /// The name used in plans, records and the UI.
    pub fn name(&self) -> &'static str {
        match self {
            Dialect::OpenaiChat => "openai-chat",
            Dialect::OpenaiResponses => "openai-responses",
            Dialect::Anthropic => "anthropic",
            Dialect::Custom(_) => "custom",
            Dialect::Text => "text",
        }
    }

    /// Whether the dialect's streams end with a marker of their own (`[DONE]`,
    /// `message_stop`, `response.completed`, the custom done event). A stream in such a
    /// dialect that ends without it was cut off. Plain text has none, nor a custom
    /// dialect without a done event.
    pub fn has_end_marker(&self) -> bool {
        match self {
            Dialect::OpenaiChat | Dialect::OpenaiResponses | Dialect::Anthropic => true,
            Dialect::Custom(custom) => custom.done_event.is_some(),
            Dialect::Text => false,
        }
    }

    /// Looks a plain dialect up by its name (a custom one needs its description).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::PLAIN.into_iter().find(|d| d.name() == name)
    }

    /// What one event carried.
    pub fn decode(&self, event: &Event) -> Result<Decoded, DecodeError> {
        match self {
            Dialect::OpenaiChat => decode_openai_chat(event),
            Dialect::OpenaiResponses => decode_openai_responses(event),
            Dialect::Anthropic => decode_anthropic(event),
            Dialect::Custom(custom) => decode_custom(custom, event),
            // `[DONE]` ends a plain-text stream as it ends an OpenAI one; it is not text.
            Dialect::Text if event.data.trim() == "[DONE]" => Ok(Decoded {
                done: true,
                ..Decoded::default()
            }),
            Dialect::Text => Ok(Decoded {
                content: event.data.clone(),
                ..Decoded::default()
            }),
        }
    }
}

/// Token counts a stream reports about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    /// All generated tokens, reasoning included where the model reasons.
    pub output_tokens: Option<u64>,
    /// Of the output tokens, the reasoning ones, when the stream says (OpenAI's
    /// `completion_tokens_details.reasoning_tokens`, the Responses API's
    /// `output_tokens_details.reasoning_tokens`).
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl Usage {
    /// A later report updates the counts it carries and keeps the others (Anthropic sends
    /// input tokens at the start and output tokens at the end).
    pub fn merge(earlier: Option<Usage>, later: Usage) -> Usage {
        let earlier = earlier.unwrap_or_default();
        Usage {
            input_tokens: later.input_tokens.or(earlier.input_tokens),
            output_tokens: later.output_tokens.or(earlier.output_tokens),
            reasoning_tokens: later.reasoning_tokens.or(earlier.reasoning_tokens),
        }
    }
}

/// A server's own timing breakdown (`auth_ms`, `retrieval_ms`, …): the numeric entries of
/// the object it sent.
pub type Timings = BTreeMap<String, f64>;

/// What one event carried, as far as timing is concerned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decoded {
    /// Answer text ("" when the event carried none).
    pub content: String,
    /// Reasoning text ("" when none).
    pub reasoning: String,
    /// Reasoning the stream carried without its text (Anthropic's `redacted_thinking`
    /// block): output all the same.
    pub opaque_reasoning: bool,
    /// The event carried (part of) a tool call.
    pub tool_call: bool,
    /// Token counts, when the event reported them.
    pub usage: Option<Usage>,
    /// An error reported inside the stream (an HTTP 200 stream can still fail): its
    /// message, for the page that measured it. Never uploaded: it is the target's text.
    pub error: Option<String>,
    /// The same error's `type` and `code`, where they are short identifiers
    /// (`overloaded_error`, `502`): what a record may carry of it.
    pub error_code: Option<String>,
    /// The stream's own end marker.
    pub done: bool,
    /// The server's timing breakdown, when the event carried one.
    pub timings: Option<Timings>,
}

impl Decoded {
    /// The event carried answer text: the first such event is the TTFT.
    pub fn has_answer(&self) -> bool {
        !self.content.is_empty()
    }

    /// The event carried reasoning, with its text or without.
    pub fn has_reasoning(&self) -> bool {
        !self.reasoning.is_empty() || self.opaque_reasoning
    }

    /// The event carried any generated output: reasoning, a tool call or answer text.
    pub fn has_output(&self) -> bool {
        self.has_answer() || self.has_reasoning() || self.tool_call
    }
}

/// An event that does not have the shape its dialect promises.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{dialect} event is not valid: {reason}")]
pub struct DecodeError {
    pub dialect: &'static str,
    pub reason: String,
}

/// Parses an event's data. The reason given on failure says where, never what: serde's
/// own messages can quote the data, which is the target's text and is uploaded.
fn parse<'a, T: Deserialize<'a>>(dialect: &'static str, data: &'a str) -> Result<T, DecodeError> {
    serde_json::from_str(data).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Syntax => "its data is not JSON",
            serde_json::error::Category::Eof => "its data ends inside a JSON value",
            serde_json::error::Category::Data | serde_json::error::Category::Io => {
                "its data is JSON of another shape than this dialect sends"
            }
        };
        DecodeError {
            dialect,
            reason: format!("{what} (line {}, column {})", e.line(), e.column()),
        }
    })
}

/// The numeric entries of a JSON object, or nothing when it is not one.
pub fn timings_from(value: &Value) -> Option<Timings> {
    let object = value.as_object()?;
    Some(
        object
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
            .collect(),
    )
}

/// The error at `pointer` in `data`, if something other than `null` is there: its
/// message and its identifiers.
fn error_at(data: &Value, pointer: &str) -> (Option<String>, Option<String>) {
    match data.pointer(pointer).filter(|v| !v.is_null()) {
        Some(error) => (Some(error_message(error)), error_code(error)),
        None => (None, None),
    }
}

/// An error object's `type` and `code`, where each is a short identifier or a number:
/// `type overloaded_error, code 529`. Free text never passes.
fn error_code(error: &Value) -> Option<String> {
    let parts: Vec<String> = ["type", "code"]
        .into_iter()
        .filter_map(|key| Some(format!("{key} {}", identifier(error.get(key)?)?)))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// A value that can only be an identifier: an integer, or up to 64 letters, digits and
/// `_ - . :`.
fn identifier(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        Value::String(s)
            if !s.is_empty()
                && s.len() <= 64
                && s.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':')
                }) =>
        {
            Some(s.clone())
        }
        _ => None,
    }
}

/// What kind of JSON value this is, for messages that must not quote it.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The human-readable part of an error object: `{"message": ...}` where there is one.
fn error_message(error: &Value) -> String {
    match error.get("message").and_then(Value::as_str) {
        Some(message) => message.to_owned(),
        None => match error.as_str() {
            Some(text) => text.to_owned(),
            None => error.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, data: &str) -> Event {
        Event {
            event: kind.into(),
            data: data.into(),
            id: String::new(),
        }
    }

    fn chat(data: &str) -> Decoded {
        Dialect::OpenaiChat
            .decode(&event("message", data))
            .expect(data)
    }

    #[test]
    fn role_only_empty_and_null_content_are_not_tokens() {
        for data in [
            r#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
            r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"delta":{"content":null}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
        ] {
            assert!(!chat(data).has_output(), "{data} counted as output");
        }
    }

    #[test]
    fn tool_calls_are_output_but_not_answer() {
        let decoded =
            chat(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]}"#);
        assert!(decoded.has_output());
        assert!(!decoded.has_answer());
        let anthropic = Dialect::Anthropic
            .decode(&event(
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
            ))
            .expect("valid");
        assert!(anthropic.tool_call && !anthropic.has_answer());
        let responses = Dialect::OpenaiResponses
            .decode(&event(
                "response.function_call_arguments.delta",
                r#"{"type":"response.function_call_arguments.delta","delta":"{\"q\":"}"#,
            ))
            .expect("valid");
        assert!(responses.tool_call && !responses.has_answer());
    }

    #[test]
    fn error_objects_give_their_message() {
        assert_eq!(
            chat(r#"{"error":{"message":"overloaded","code":502}}"#)
                .error
                .as_deref(),
            Some("overloaded")
        );
        assert_eq!(chat(r#"{"error":"plain"}"#).error.as_deref(), Some("plain"));
        assert_eq!(chat(r#"{"error":"plain"}"#).error_code, None);
        let coded = chat(
            r#"{"error":{"message":"quota for alice@example.com","type":"rate_limit","code":429}}"#,
        );
        assert_eq!(
            coded.error_code.as_deref(),
            Some("type rate_limit, code 429")
        );
        let free_text_code = chat(r#"{"error":{"message":"m","code":"user alice said hi"}}"#);
        assert_eq!(
            free_text_code.error_code, None,
            "free text is not an identifier"
        );
        let anthropic = Dialect::Anthropic
            .decode(&event(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ))
            .expect("valid");
        assert_eq!(anthropic.error.as_deref(), Some("Overloaded"));
        let responses = Dialect::OpenaiResponses
            .decode(&event(
                "response.failed",
                r#"{"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}}"#,
            ))
            .expect("valid");
        assert_eq!(responses.error.as_deref(), Some("boom"));
    }

    #[test]
    fn malformed_json_is_a_decode_error_that_says_why() {
        for dialect in [
            Dialect::OpenaiChat,
            Dialect::OpenaiResponses,
            Dialect::Anthropic,
        ] {
            let err = dialect
                .decode(&event("message", "{not json"))
                .expect_err("must fail");
            assert!(
                err.to_string()
                    .starts_with(&format!("{} event is not valid", dialect.name())),
                "{err}"
            );
        }
    }

    #[test]
    fn custom_dialect_finds_text_and_timings_by_pointer() {
        let custom = Dialect::Custom(CustomDialect {
            token_event: "token".into(),
            token_pointer: "/t".into(),
            done_event: Some("done".into()),
            timings_pointer: Some("/timings".into()),
            error_pointer: None,
        });
        assert_eq!(
            custom
                .decode(&event("token", r#"{"t":"hi"}"#))
                .expect("token")
                .content,
            "hi"
        );
        // Other events are not parsed at all: a `meta` event may be anything.
        assert_eq!(
            custom.decode(&event("meta", "not json")).expect("ignored"),
            Decoded::default()
        );
        let done = custom
            .decode(&event("done", r#"{"timings":{"auth_ms":0.5,"note":"x"}}"#))
            .expect("done");
        assert!(done.done);
        assert_eq!(
            done.timings,
            Some(Timings::from([("auth_ms".to_owned(), 0.5)]))
        );
        let err = custom
            .decode(&event("token", r#"{"t":5}"#))
            .expect_err("not text");
        assert!(err.reason.contains("/t holds a number"), "{err}");
        // A parse error says where, never what: the data is the target's text.
        let err = Dialect::OpenaiChat
            .decode(&event("message", r#"{"choices": "sk-secret-123"}"#))
            .expect_err("wrong shape");
        assert!(!err.to_string().contains("sk-secret"), "{err}");
        assert!(err.reason.contains("line 1, column"), "{err}");
    }

    #[test]
    fn custom_dialect_descriptions_are_checked() {
        let mut custom = CustomDialect {
            token_event: "token".into(),
            token_pointer: "t".into(),
            done_event: None,
            timings_pointer: None,
            error_pointer: None,
        };
        assert_eq!(
            custom.validate().expect_err("pointer").field,
            "token_pointer"
        );
        custom.token_pointer = "/t".into();
        custom.token_event = "two words".into();
        assert_eq!(custom.validate().expect_err("name").field, "token_event");
        custom.token_event = "token".into();
        assert_eq!(custom.validate(), Ok(()));
    }

    #[test]
    fn a_refusal_is_the_answer() {
        let decoded = chat(r#"{"choices":[{"delta":{"refusal":"I can't help with that."}}]}"#);
        assert!(decoded.has_answer());
        assert_eq!(decoded.content, "I can't help with that.");
    }

    #[test]
    fn an_empty_reasoning_name_does_not_hide_the_other() {
        for data in [
            r#"{"choices":[{"delta":{"reasoning_content":"","reasoning":"Let me think"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"Let me think","reasoning":""}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":null,"reasoning":"Let me think"}}]}"#,
        ] {
            let decoded = chat(data);
            assert_eq!(decoded.reasoning, "Let me think", "{data}");
            assert!(decoded.has_output() && !decoded.has_answer(), "{data}");
        }
    }

    #[test]
    fn reasoning_token_counts_are_read() {
        let decoded = chat(
            r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":40,"completion_tokens_details":{"reasoning_tokens":32}}}"#,
        );
        assert_eq!(
            decoded.usage,
            Some(Usage {
                input_tokens: Some(9),
                output_tokens: Some(40),
                reasoning_tokens: Some(32)
            })
        );
        let responses = Dialect::OpenaiResponses
            .decode(&event(
                "response.completed",
                r#"{"type":"response.completed","response":{"usage":{"input_tokens":9,"output_tokens":40,"output_tokens_details":{"reasoning_tokens":30}}}}"#,
            ))
            .expect("valid");
        assert_eq!(responses.usage.and_then(|u| u.reasoning_tokens), Some(30));
    }

    #[test]
    fn redacted_thinking_is_output() {
        let decoded = Dialect::Anthropic
            .decode(&event(
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3p"}}"#,
            ))
            .expect("valid");
        assert!(decoded.has_output() && decoded.has_reasoning() && !decoded.has_answer());
        // A thinking block's start carries no thinking yet: its deltas do.
        let thinking = Dialect::Anthropic
            .decode(&event(
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            ))
            .expect("valid");
        assert!(!thinking.has_output());
    }

    #[test]
    fn done_ends_a_text_stream_and_is_not_text() {
        let done = Dialect::Text
            .decode(&event("message", "[DONE]"))
            .expect("valid");
        assert!(done.done && !done.has_answer());
        assert!(
            Dialect::Text
                .decode(&event("message", "DONE soon"))
                .expect("valid")
                .has_answer()
        );
    }

    #[test]
    fn a_custom_error_pointer_finds_errors_in_any_event() {
        let custom = Dialect::Custom(CustomDialect {
            token_event: "token".into(),
            token_pointer: "/t".into(),
            done_event: Some("done".into()),
            timings_pointer: None,
            error_pointer: Some("/error".into()),
        });
        let decode = |kind: &str, data: &str| custom.decode(&event(kind, data)).expect(data);
        assert_eq!(
            decode("error", r#"{"error":{"message":"quota exceeded"}}"#)
                .error
                .as_deref(),
            Some("quota exceeded")
        );
        assert_eq!(
            decode("token", r#"{"t":"","error":"model unavailable"}"#)
                .error
                .as_deref(),
            Some("model unavailable")
        );
        assert_eq!(decode("token", r#"{"t":"hi","error":null}"#).error, None);
        assert_eq!(decode("meta", "not json").error, None);
        let mut description = CustomDialect {
            token_event: "token".into(),
            token_pointer: "/t".into(),
            done_event: None,
            timings_pointer: None,
            error_pointer: Some("error".into()),
        };
        assert_eq!(
            description.validate().expect_err("not a pointer").field,
            "error_pointer"
        );
        description.error_pointer = Some(String::new());
        assert_eq!(
            description.validate().expect_err("the whole event").field,
            "error_pointer"
        );
    }

    #[test]
    fn usage_reports_merge_field_by_field() {
        let start = Usage {
            input_tokens: Some(31),
            output_tokens: Some(1),
            reasoning_tokens: None,
        };
        let end = Usage {
            input_tokens: None,
            output_tokens: Some(4),
            reasoning_tokens: None,
        };
        assert_eq!(
            Usage::merge(Some(start), end),
            Usage {
                input_tokens: Some(31),
                output_tokens: Some(4),
                reasoning_tokens: None,
            }
        );
    }

    #[test]
    fn names_round_trip() {
        for dialect in Dialect::PLAIN {
            assert_eq!(Dialect::from_name(dialect.name()), Some(dialect.clone()));
            let json = serde_json::to_string(&dialect).expect("serializes");
            assert_eq!(json, format!("\"{}\"", dialect.name()));
        }
        assert_eq!(Dialect::from_name("grpc"), None);
        let custom: Dialect = serde_json::from_str(
            r#"{"custom":{"token_event":"token","token_pointer":"/t","done_event":"done","timings_pointer":"/timings"}}"#,
        )
        .expect("custom parses");
        assert_eq!(custom.name(), "custom");
    }
}
