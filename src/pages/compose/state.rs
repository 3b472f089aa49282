//! The compose page's state, made in one place and handed whole to every section: the
//! form's values as one [`Form`] (what `firsttoken_pages::compose` builds the study from),
//! what the page keeps beside them, the target check, and the link made.

use firsttoken_core::share::Study;
use firsttoken_core::study_id::study_id_from_random;
use firsttoken_pages::compose::{Form, FormError, Protocol, loopback_fresh_url};
use firsttoken_pages::page::Page;
use firsttoken_pages::presets::{KeyHeader, Preset};
use firsttoken_stream::dialect::Dialect;
use leptos::prelude::*;

use super::checklist::Checked;
use crate::browser;
use crate::platform::Scope;

/// An OpenAI-style streaming request, asking for usage so tokens are counted by the
/// server rather than guessed from chunks.
pub const DEFAULT_BODY: &str = r#"{
  "model": "firsttoken-demo",
  "stream": true,
  "stream_options": { "include_usage": true },
  "messages": [{ "role": "user", "content": "Say hello in a few words." }]
}"#;

/// The page's state. The sections read it through memos and slices of these signals, so
/// a field's readers wake only when that field changes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Compose {
    /// The form's values, as typed: the study is built from them.
    pub form: RwSignal<Form>,
    /// What the page keeps beside them, never in the link.
    pub aside: RwSignal<Aside>,
    /// The target check: running, or what it found.
    pub checked: RwSignal<Option<Checked>>,
    /// The link made, what the link card shows with it, and the form's error.
    pub outcome: RwSignal<Outcome>,
}

/// What the page keeps beside the form's values: how its menus were set, and the admin
/// token.
#[derive(Debug, Clone, Default)]
pub(super) struct Aside {
    /// What the Endpoint menu shows: "demo", a preset's key, or "custom" once the target
    /// URL is edited by hand.
    pub endpoint: String,
    /// The Endpoint menu's preset, when one is chosen.
    pub preset: Option<&'static Preset>,
    /// The preset's base URL, that the target URL is made from.
    pub base_url: String,
    /// The compared endpoint's preset's base URL, that its URL is made from.
    pub compare_base: String,
    /// The fresh-connection URL follows the target URL (this server's `{n}.localhost`
    /// names) until edited by hand.
    pub fresh_edited: bool,
    /// This server's admin token, to sign the link: it goes to this server only.
    pub admin_token: String,
}

/// What making a link gave: the link and what the link card shows with it, or why there
/// is none.
#[derive(Debug, Clone, Default)]
pub(super) struct Outcome {
    /// The link to share; `None` until one is made, and while the server signs it.
    pub link: Option<String>,
    /// Whether this server signed the link.
    pub signed: bool,
    /// Where the link's runs can be read.
    pub results: Option<String>,
    /// The study as JSON, to edit and make the link from again.
    pub json: String,
    /// What is wrong with the form, the JSON or the signing.
    pub error: Option<String>,
}

impl Compose {
    /// The page as it opens: this server's demo as the target, this server's collector
    /// for the results.
    pub(super) fn new() -> Self {
        let url = demo_url();
        let form = Form {
            title: "Chat latency".to_owned(),
            fresh_url: loopback_fresh_url(&url).unwrap_or_default(),
            url,
            label: "demo".to_owned(),
            version: String::new(),
            dialect: Dialect::OpenaiChat,
            body: DEFAULT_BODY.to_owned(),
            protocol: Protocol::Quick,
            requests: "20".to_owned(),
            headers: String::new(),
            key_header: KeyHeader::Bearer,
            token: String::new(),
            token_is_for_benchmark: false,
            send_cookies: false,
            compare_url: String::new(),
            compare_label: String::new(),
            compare_preset: None,
            compare_key: String::new(),
            collector: on_this_page(|page| page.own_collector()),
            run_tag_header: String::new(),
        };
        Compose {
            form: RwSignal::new(form),
            aside: RwSignal::new(Aside {
                endpoint: "demo".to_owned(),
                ..Aside::default()
            }),
            checked: RwSignal::new(None),
            outcome: RwSignal::new(Outcome::default()),
        }
    }

    /// The study the form describes now, under a new id, or the field at fault.
    pub(super) fn build(self) -> Result<Study, FormError> {
        self.form
            .with_untracked(|form| on_this_page(|page| form.build(page, new_study_id())))
    }

    /// Puts `error` under the form.
    pub(super) fn fail(self, error: String) {
        self.outcome.update(|o| o.error = Some(error));
    }
}

/// This server's demo target: the demo, the collector and the app are under its base path.
pub(super) fn demo_url() -> String {
    format!("{}/v1/chat/completions", browser::app_root())
}

/// A new study id from the browser's cryptographic generator.
pub(super) fn new_study_id() -> String {
    let random = Scope::current().random_bytes();
    let mut first = [0u8; 10];
    first.copy_from_slice(&random[..10]);
    study_id_from_random(first)
}

/// This page, as the form's rules see it.
pub(super) fn on_this_page<T>(f: impl FnOnce(Page) -> T) -> T {
    let (origin, base_path) = (browser::page_origin(), browser::base_path());
    let host = web_sys::window()
        .and_then(|w| w.location().host().ok())
        .unwrap_or_default();
    f(Page {
        origin: &origin,
        host: &host,
        base_path: &base_path,
    })
}
