//! A custom dialect: JSON pointers (set on the compose page) say where an event carries
//! its text, its reasoning, its usage, its error and its end.

use serde_json::Value;

use crate::dialect::{CustomDialect, DecodeError, Decoded, error_at, kind_of, parse, timings_from};
use crate::sse::Event;

pub(super) fn decode_custom(custom: &CustomDialect, event: &Event) -> Result<Decoded, DecodeError> {
    let is_token = event.event == custom.token_event;
    let is_done = custom.done_event.as_deref() == Some(event.event.as_str());
    let mut decoded = Decoded {
        done: is_done,
        ..Decoded::default()
    };
    if !(is_token || is_done) {
        // Other events may be anything; only an error object is looked for in them.
        if let Some(pointer) = &custom.error_pointer
            && let Ok(data) = serde_json::from_str::<Value>(&event.data)
        {
            (decoded.error, decoded.error_code) = error_at(&data, pointer);
        }
        return Ok(decoded);
    }
    let data: Value = parse("custom", &event.data)?;
    if let Some(pointer) = &custom.error_pointer {
        (decoded.error, decoded.error_code) = error_at(&data, pointer);
    }
    if is_token {
        decoded.content = match data.pointer(&custom.token_pointer) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => {
                return Err(DecodeError {
                    dialect: "custom",
                    reason: format!(
                        "{} holds {}, not text",
                        custom.token_pointer,
                        kind_of(other)
                    ),
                });
            }
        };
    }
    if is_done && let Some(pointer) = &custom.timings_pointer {
        decoded.timings = data.pointer(pointer).and_then(timings_from);
    }
    Ok(decoded)
}
