//! OpenAI's two streaming formats: Chat Completions (`choices[].delta`, the format most
//! compatible servers speak) and the Responses API (typed events such as
//! `response.output_text.delta`).

use serde::Deserialize;
use serde_json::Value;

use crate::dialect::{DecodeError, Decoded, Usage, error_code, error_message, identifier, parse};
use crate::sse::Event;

/// The parts of a `chat.completion.chunk` that matter; everything else is ignored.
#[derive(Deserialize)]
struct ChatChunk {
    #[serde(default)]
    choices: Vec<ChatChoice>,
    usage: Option<ChatUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChatChoice {
    delta: Option<ChatDelta>,
}

#[derive(Deserialize)]
struct ChatDelta {
    content: Option<String>,
    /// A model declining to answer: that is the answer the user reads.
    refusal: Option<String>,
    reasoning_content: Option<String>,
    /// OpenRouter's name for the same thing.
    reasoning: Option<String>,
    tool_calls: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct ChatUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    completion_tokens_details: Option<ReasoningDetails>,
}

/// `{"reasoning_tokens": n}`, in chat completions' and the Responses API's usage.
#[derive(Deserialize)]
struct ReasoningDetails {
    reasoning_tokens: Option<u64>,
}

pub(super) fn decode_openai_chat(event: &Event) -> Result<Decoded, DecodeError> {
    if event.data.trim() == "[DONE]" {
        return Ok(Decoded {
            done: true,
            ..Decoded::default()
        });
    }
    let chunk: ChatChunk = parse("openai-chat", &event.data)?;
    let mut decoded = Decoded {
        usage: chunk.usage.map(|u| Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
        }),
        error: chunk.error.as_ref().map(error_message),
        error_code: chunk.error.as_ref().and_then(error_code),
        ..Decoded::default()
    };
    for delta in chunk.choices.into_iter().filter_map(|c| c.delta) {
        for text in [delta.content, delta.refusal].into_iter().flatten() {
            decoded.content.push_str(&text);
        }
        // Some servers send both names, one of them empty: the one with text counts.
        if let Some(text) = [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
            .find(|t| !t.is_empty())
        {
            decoded.reasoning.push_str(&text);
        }
        decoded.tool_call |= delta.tool_calls.is_some_and(|calls| !calls.is_empty());
    }
    Ok(decoded)
}

// --- OpenAI Responses --------------------------------------------------------------------

#[derive(Deserialize)]
struct ResponsesEvent {
    #[serde(rename = "type")]
    kind: String,
    delta: Option<String>,
    item: Option<TypedItem>,
    response: Option<ResponsesResponse>,
    message: Option<String>,
    code: Option<Value>,
}

/// An object named by its `type` (Anthropic's content blocks use it too).
#[derive(Deserialize)]
pub(super) struct TypedItem {
    #[serde(rename = "type")]
    pub(super) kind: String,
}

#[derive(Deserialize)]
struct ResponsesResponse {
    usage: Option<TokenCounts>,
    error: Option<Value>,
}

/// Responses and Anthropic name the counts as firsttoken does, among other fields.
#[derive(Deserialize)]
pub(super) struct TokenCounts {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    /// The Responses API's breakdown (Anthropic gives none).
    output_tokens_details: Option<ReasoningDetails>,
}

impl From<TokenCounts> for Usage {
    fn from(u: TokenCounts) -> Self {
        Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            reasoning_tokens: u.output_tokens_details.and_then(|d| d.reasoning_tokens),
        }
    }
}

pub(super) fn decode_openai_responses(event: &Event) -> Result<Decoded, DecodeError> {
    let e: ResponsesEvent = parse("openai-responses", &event.data)?;
    let mut decoded = Decoded::default();
    let delta = e.delta.unwrap_or_default();
    match e.kind.as_str() {
        "response.output_text.delta" | "response.refusal.delta" => decoded.content = delta,
        "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
            decoded.reasoning = delta
        }
        "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
            decoded.tool_call = !delta.is_empty();
        }
        "response.output_item.added" => {
            decoded.tool_call = e.item.is_some_and(|i| i.kind.ends_with("_call"));
        }
        "response.completed" | "response.incomplete" => {
            decoded.done = true;
            decoded.usage = e.response.and_then(|r| r.usage).map(Usage::from);
        }
        "response.failed" => {
            decoded.done = true;
            let error = e.response.and_then(|r| r.error);
            decoded.error_code = error.as_ref().and_then(error_code);
            decoded.error = Some(
                error
                    .as_ref()
                    .map_or_else(|| "the response failed".to_owned(), error_message),
            );
        }
        "error" => {
            decoded.error_code = e.code.as_ref().and_then(identifier);
            decoded.error = Some(e.message.unwrap_or_else(|| "error event".to_owned()));
        }
        _ => {}
    }
    Ok(decoded)
}
