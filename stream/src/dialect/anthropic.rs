//! Anthropic's Messages stream: `message_start`, content blocks and their deltas,
//! `message_delta` with the usage, `message_stop`, pings and errors.

use serde::Deserialize;
use serde_json::Value;

use super::openai::{TokenCounts, TypedItem};
use crate::dialect::{DecodeError, Decoded, Usage, error_code, error_message, parse};
use crate::sse::Event;

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum AnthropicEvent {
    MessageStart {
        message: AnthropicMessage,
    },
    ContentBlockStart {
        content_block: TypedItem,
    },
    ContentBlockDelta {
        delta: AnthropicDelta,
    },
    MessageDelta {
        usage: Option<TokenCounts>,
    },
    MessageStop,
    Error {
        error: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct AnthropicMessage {
    usage: Option<TokenCounts>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum AnthropicDelta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

pub(super) fn decode_anthropic(event: &Event) -> Result<Decoded, DecodeError> {
    let mut decoded = Decoded::default();
    match parse("anthropic", &event.data)? {
        AnthropicEvent::MessageStart { message } => decoded.usage = message.usage.map(Usage::from),
        AnthropicEvent::ContentBlockStart { content_block } => {
            decoded.tool_call = content_block.kind.ends_with("tool_use");
            // Its thinking arrives encrypted, whole, in this one event: no deltas follow.
            decoded.opaque_reasoning = content_block.kind == "redacted_thinking";
        }
        AnthropicEvent::ContentBlockDelta { delta } => match delta {
            AnthropicDelta::TextDelta { text } => decoded.content = text,
            AnthropicDelta::ThinkingDelta { thinking } => decoded.reasoning = thinking,
            AnthropicDelta::InputJsonDelta { partial_json } => {
                decoded.tool_call = !partial_json.is_empty()
            }
            AnthropicDelta::Other => {}
        },
        AnthropicEvent::MessageDelta { usage } => decoded.usage = usage.map(Usage::from),
        AnthropicEvent::MessageStop => decoded.done = true,
        AnthropicEvent::Error { error } => {
            decoded.error = Some(error_message(&error));
            decoded.error_code = error_code(&error);
        }
        AnthropicEvent::Other => {}
    }
    Ok(decoded)
}
