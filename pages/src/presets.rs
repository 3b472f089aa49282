//! Provider presets: what the compose page fills in for the endpoints operators measure or
//! compare with most often: the URL, the stream format, the headers and a minimal
//! streaming body. The operator edits any of it afterwards (the model name, surely).

use std::collections::BTreeMap;

use firsttoken_core::plan::TargetPlan;
use firsttoken_stream::dialect::Dialect;

/// Where a preset puts the API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `Authorization: Bearer {key}`.
    Bearer,
    /// The key as the whole value of this header (`x-api-key: {key}`).
    Plain(&'static str),
}

impl KeyHeader {
    /// The header name and value for `key`.
    pub fn header(self, key: &str) -> (String, String) {
        match self {
            KeyHeader::Bearer => ("Authorization".to_owned(), format!("Bearer {key}")),
            KeyHeader::Plain(name) => (name.to_owned(), key.to_owned()),
        }
    }

    /// How the page describes it: `Authorization: Bearer …`.
    pub fn describe(self) -> String {
        match self {
            KeyHeader::Bearer => "Authorization: Bearer …".to_owned(),
            KeyHeader::Plain(name) => format!("{name}: …"),
        }
    }
}

/// One provider's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// Stable name (`openai-chat`, …): the page's option values and tests use it.
    pub key: &'static str,
    pub title: &'static str,
    /// The endpoint's URL; for a preset with a base URL, the path after it.
    pub url: &'static str,
    /// The server is the operator's own (vLLM, llama.cpp, Ollama, TGI): the URL is their
    /// base URL followed by [`Preset::url`]. This is the base URL offered.
    pub base_url: Option<&'static str>,
    pub dialect: DialectName,
    pub key_header: KeyHeader,
    /// Headers every request carries besides the key.
    pub headers: &'static [(&'static str, &'static str)],
    /// A minimal streaming request: one short question, usage asked for where the API
    /// needs asking.
    pub body: &'static str,
}

/// A plain dialect by name, so presets can be constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialectName {
    OpenaiChat,
    OpenaiResponses,
    Anthropic,
}

impl DialectName {
    pub fn dialect(self) -> Dialect {
        match self {
            DialectName::OpenaiChat => Dialect::OpenaiChat,
            DialectName::OpenaiResponses => Dialect::OpenaiResponses,
            DialectName::Anthropic => Dialect::Anthropic,
        }
    }
}

/// The presets, in the order the page offers them.
pub const PRESETS: [Preset; 5] = [
    Preset {
        key: "openai-chat",
        title: "OpenAI chat completions",
        url: "https://api.openai.com/v1/chat/completions",
        base_url: None,
        dialect: DialectName::OpenaiChat,
        key_header: KeyHeader::Bearer,
        headers: &[],
        body: r#"{
  "model": "gpt-4.1-mini",
  "stream": true,
  "stream_options": { "include_usage": true },
  "messages": [{ "role": "user", "content": "Say hello in a few words." }]
}"#,
    },
    Preset {
        key: "openai-responses",
        title: "OpenAI Responses",
        url: "https://api.openai.com/v1/responses",
        base_url: None,
        dialect: DialectName::OpenaiResponses,
        key_header: KeyHeader::Bearer,
        headers: &[],
        // The Responses API reports usage in `response.completed` unasked.
        body: r#"{
  "model": "gpt-4.1-mini",
  "stream": true,
  "input": "Say hello in a few words."
}"#,
    },
    Preset {
        key: "anthropic",
        title: "Anthropic Messages",
        url: "https://api.anthropic.com/v1/messages",
        base_url: None,
        dialect: DialectName::Anthropic,
        key_header: KeyHeader::Plain("x-api-key"),
        // Anthropic answers a browser's request (one with an Origin) only with the first.
        headers: &[
            ("anthropic-dangerous-direct-browser-access", "true"),
            ("anthropic-version", "2023-06-01"),
        ],
        body: r#"{
  "model": "claude-3-5-haiku-latest",
  "max_tokens": 64,
  "stream": true,
  "messages": [{ "role": "user", "content": "Say hello in a few words." }]
}"#,
    },
    Preset {
        key: "openrouter",
        title: "OpenRouter",
        url: "https://openrouter.ai/api/v1/chat/completions",
        base_url: None,
        dialect: DialectName::OpenaiChat,
        key_header: KeyHeader::Bearer,
        headers: &[],
        body: r#"{
  "model": "openai/gpt-4.1-mini",
  "stream": true,
  "stream_options": { "include_usage": true },
  "messages": [{ "role": "user", "content": "Say hello in a few words." }]
}"#,
    },
    Preset {
        key: "openai-compatible",
        title: "OpenAI-compatible server (vLLM, llama.cpp, Ollama, TGI)",
        url: "/chat/completions",
        base_url: Some("http://localhost:8000/v1"),
        dialect: DialectName::OpenaiChat,
        key_header: KeyHeader::Bearer,
        headers: &[],
        body: r#"{
  "model": "your-model",
  "stream": true,
  "stream_options": { "include_usage": true },
  "messages": [{ "role": "user", "content": "Say hello in a few words." }]
}"#,
    },
];

impl Preset {
    /// The preset named `key`.
    pub fn find(key: &str) -> Option<&'static Preset> {
        PRESETS.iter().find(|p| p.key == key)
    }

    /// The endpoint URL: for a preset with a base URL, `base` (its trailing `/` dropped)
    /// followed by the preset's path.
    pub fn url(&self, base: &str) -> String {
        match self.base_url {
            Some(_) => format!("{}{}", base.trim().trim_end_matches('/'), self.url),
            None => self.url.to_owned(),
        }
    }

    /// The request headers, with the key where the API wants it (none when `key` is
    /// empty).
    pub fn headers(&self, key: &str) -> BTreeMap<String, String> {
        let mut headers: BTreeMap<String, String> = self
            .headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        if !key.trim().is_empty() {
            let (name, value) = self.key_header.header(key.trim());
            headers.insert(name, value);
        }
        headers
    }

    /// The target this preset describes.
    pub fn target(&self, label: &str, base: &str, key: &str) -> TargetPlan {
        let mut target = TargetPlan::new(label, &self.url(base), self.dialect.dialect(), self.body);
        target.headers = self.headers(key);
        target
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firsttoken_core::plan::Plan;
    use firsttoken_stream::recorder::StreamRecorder;

    /// A recorded stream of each preset's provider (the shared fixtures).
    fn recorded(preset: &Preset) -> &'static [u8] {
        match preset.key {
            "openai-chat" | "openai-compatible" => {
                include_bytes!("../../stream/tests/fixtures/sse/openai_chat_basic.sse")
            }
            "openai-responses" => {
                include_bytes!("../../stream/tests/fixtures/sse/openai_responses.sse")
            }
            "anthropic" => include_bytes!("../../stream/tests/fixtures/sse/anthropic_messages.sse"),
            "openrouter" => {
                include_bytes!("../../stream/tests/fixtures/sse/openrouter_keepalive_comments.sse")
            }
            other => panic!("no recorded stream for {other}"),
        }
    }

    #[test]
    fn each_preset_reads_its_providers_recorded_stream() {
        for preset in &PRESETS {
            let mut recorder = StreamRecorder::new(preset.dialect.dialect());
            recorder.on_chunk(0.0, recorded(preset));
            let m = recorder.finish();
            assert!(
                m.parse_error.is_none() && m.stream_error.is_none(),
                "{}: {m:?}",
                preset.key
            );
            assert!(m.content_chunks > 0, "{}: no answer text", preset.key);
            assert!(m.done, "{}: the end marker", preset.key);
            assert!(
                m.usage.and_then(|u| u.output_tokens).is_some(),
                "{}: usage",
                preset.key
            );
        }
    }

    #[test]
    fn each_preset_makes_a_valid_streaming_plan() {
        for preset in &PRESETS {
            let target = preset.target("provider", "http://127.0.0.1:8000/v1/", "sk-test");
            let body: serde_json::Value =
                serde_json::from_str(preset.body).expect("the body is JSON");
            assert_eq!(body["stream"], true, "{}", preset.key);
            let plan = Plan::steady(target, 3);
            plan.validate()
                .unwrap_or_else(|e| panic!("{}: {e}", preset.key));
        }
    }

    #[test]
    fn anthropic_gets_its_browser_header_version_and_key_header() {
        let anthropic = Preset::find("anthropic").expect("the preset");
        let headers = anthropic.headers("sk-ant-test");
        assert_eq!(headers["x-api-key"], "sk-ant-test");
        assert_eq!(headers["anthropic-version"], "2023-06-01");
        assert_eq!(headers["anthropic-dangerous-direct-browser-access"], "true");
        assert!(!headers.contains_key("Authorization"));
        let body: serde_json::Value = serde_json::from_str(anthropic.body).expect("JSON");
        assert!(body["max_tokens"].is_u64(), "Messages requires max_tokens");

        let openai = Preset::find("openai-chat").expect("the preset");
        assert_eq!(openai.headers("sk-1")["Authorization"], "Bearer sk-1");
        assert!(openai.headers(" ").is_empty(), "no key, no header");
    }

    #[test]
    fn a_base_url_preset_appends_its_path() {
        let compatible = Preset::find("openai-compatible").expect("the preset");
        assert_eq!(
            compatible.url("http://gpu-box:8000/v1/"),
            "http://gpu-box:8000/v1/chat/completions"
        );
        assert_eq!(
            compatible.url(compatible.base_url.expect("a base")),
            "http://localhost:8000/v1/chat/completions"
        );
        let openai = Preset::find("openai-chat").expect("the preset");
        assert_eq!(openai.url("ignored"), openai.url);
    }
}
