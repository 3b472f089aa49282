//! The beta user's landing, painted from the link while the page's own wasm (about
//! 300 KB) is still on its way: what will be measured, what is sent, and a Start button
//! that waits for the app. The words are `firsttoken_pages::landing`'s, the ones the app
//! shows, and the markup is the app's, so nothing moves when the app takes over: it
//! removes `#painted` in the same task in which it mounts its own, and if the app came
//! first, nothing is painted.
//!
//! A link the app would refuse is not painted: the app says why when it arrives. If the
//! app has not come after 15 s, a line under Start says the page is still loading and
//! to reload it if Start stays grey.

use firsttoken_core::schema::NetworkLabel;
use firsttoken_pages::landing;
use firsttoken_pages::landing::Landing;
use firsttoken_pages::page::Page;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{Document, Element};

fn main() {
    // Nothing painted is nothing lost: the app paints the landing itself when it comes.
    let _ = paint();
}

fn paint() -> Option<()> {
    let window = web_sys::window()?;
    let document = window.document()?;
    let location = window.location();
    let origin = location.origin().ok()?;
    let host = location.host().ok()?;
    let study = landing::open(&location.hash().ok()?, &origin).ok()?.study;
    // The base path the server wrote into the page, read as the app's
    // `browser::base_path` reads it.
    let base = document
        .query_selector("meta[name=firsttoken-base]")
        .ok()
        .flatten()
        .and_then(|meta| meta.get_attribute("content"))
        .unwrap_or_default();
    let words = Landing::of(
        &study,
        Page {
            origin: &origin,
            host: &host,
            base_path: &base,
        },
        // The app asks the page's server who made the link when it comes.
        &landing::Provenance::Checking,
    );
    // The app's module may have come first (from the cache, say): then it is there,
    // with its `<main>`, and painting would put a second landing under it. The app
    // removes a painted landing when it mounts; this is the other order.
    if document.query_selector("main").ok().flatten().is_some() {
        return None;
    }
    let painter = Painter { document };
    let painted = painter.page(&words)?;
    painter.document.body()?.append_child(&painted).ok()?;
    // A page whose app never comes would otherwise show a grey Start for ever.
    let later = Closure::once_into_js(move || painter.still_loading());
    window
        .set_timeout_with_callback_and_timeout_and_arguments_0(
            later.unchecked_ref(),
            landing::STILL_LOADING_AFTER_MS,
        )
        .ok()?;
    Some(())
}

/// Makes elements. Every DOM call here fails only on a broken page; then nothing is
/// painted, and the app paints the landing when it comes.
struct Painter {
    document: Document,
}

impl Painter {
    fn element(&self, tag: &str, attributes: &[(&str, &str)]) -> Option<Element> {
        let element = self.document.create_element(tag).ok()?;
        for (name, value) in attributes {
            element.set_attribute(name, value).ok()?;
        }
        Some(element)
    }

    fn text(&self, tag: &str, attributes: &[(&str, &str)], text: &str) -> Option<Element> {
        let element = self.element(tag, attributes)?;
        element.set_text_content(Some(text));
        Some(element)
    }

    /// Appends each child in turn.
    fn add(&self, parent: &Element, children: &[Option<Element>]) -> Option<()> {
        for child in children {
            parent.append_child(child.as_ref()?).ok()?;
        }
        Some(())
    }

    fn add_text(&self, parent: &Element, text: &str) -> Option<()> {
        parent
            .append_child(&self.document.create_text_node(text))
            .ok()
            .map(drop)
    }

    fn list<'a>(&self, lines: impl IntoIterator<Item = &'a str>) -> Option<Element> {
        let list = self.element("ul", &[])?;
        for line in lines {
            self.add(&list, &[self.text("li", &[], line)])?;
        }
        Some(list)
    }

    /// Everything the app mounts, as it looks before Start, in one element the app
    /// removes: the header (without the operator's navigation: a beta user's page has
    /// none), the landing, the footer.
    fn page(&self, words: &Landing) -> Option<Element> {
        let painted = self.element(
            "div",
            &[
                ("id", "painted"),
                ("data-testid", "painted-landing"),
                ("aria-busy", "true"),
            ],
        )?;
        let header = self.element("header", &[("class", "top")])?;
        let row = self.element("div", &[("class", "title-row")])?;
        self.add(&row, &[self.text("h1", &[], landing::APP_NAME)])?;
        self.add(
            &header,
            &[
                Some(row),
                self.text("p", &[("class", "tagline")], landing::TAGLINE),
            ],
        )?;
        let main = self.element("main", &[])?;
        self.add(&main, &[self.landing(words)])?;
        let footer = self.element("footer", &[])?;
        self.add(&footer, &[self.text("p", &[], landing::FOOTER)])?;
        self.add(&painted, &[Some(header), Some(main), Some(footer)])?;
        Some(painted)
    }

    /// The study page's landing as the app draws it before Start, its controls disabled
    /// until the app is there to run them.
    fn landing(&self, words: &Landing) -> Option<Element> {
        let section = self.element(
            "section",
            &[
                ("class", "card landing"),
                ("aria-labelledby", "study-title"),
            ],
        )?;
        let lead = self.element("p", &[("class", "lead")])?;
        self.add_text(&lead, landing::LEAD_START)?;
        self.add(&lead, &[self.text("strong", &[], &words.target_label)])?;
        self.add_text(&lead, &words.target_origin)?;
        self.add_text(&lead, landing::LEAD_MIDDLE)?;
        self.add_text(&lead, &words.lead_end)?;
        self.add(
            &section,
            &[
                self.text("h2", &[("id", "study-title")], &words.title),
                Some(lead),
            ],
        )?;
        let provenance = [
            ("class", "notice provenance"),
            ("data-testid", "provenance"),
            ("data-made-by", "checking"),
            ("role", "note"),
        ];
        self.add(&section, &[self.text("p", &provenance, &words.provenance)])?;
        for notice in [&words.session_notice, &words.token_notice]
            .into_iter()
            .flatten()
        {
            let note = [("class", "notice"), ("role", "note")];
            self.add(&section, &[self.text("p", &note, notice)])?;
        }
        let status = [("class", "status")];
        let does = self.element("div", &[])?;
        self.add(
            &does,
            &[
                self.text("h3", &[], landing::WHAT_IT_DOES),
                self.list(words.phases.iter().map(String::as_str)),
            ],
        )?;
        if let Some(compared) = &words.compared {
            self.add(&does, &[self.text("p", &status, compared)])?;
        }
        self.add(
            &does,
            &[
                self.text("p", &status, &words.hosts),
                self.text("p", &status, landing::CANCEL),
            ],
        )?;
        let sent = self.element("div", &[])?;
        self.add(
            &sent,
            &[
                self.text("h3", &[], landing::WHAT_IS_SENT),
                self.list(landing::SENT),
                self.text("h3", &[], landing::WHAT_IS_NEVER_SENT),
                self.list(landing::NEVER_SENT),
            ],
        )?;
        let details = self.element("div", &[("class", "landing-details")])?;
        self.add(&details, &[Some(does), Some(sent)])?;
        self.add(&section, &[self.form(words), Some(details)])?;
        Some(section)
    }

    /// Says, under the painted Start, that the rest of the page has not come yet, if
    /// the painted landing is still there (the app removes it when it comes).
    fn still_loading(&self) {
        let form = self
            .document
            .query_selector("#painted form.start")
            .ok()
            .flatten();
        if let (Some(form), Some(line)) = (
            form,
            self.text(
                "p",
                &[
                    ("class", "status"),
                    ("role", "status"),
                    ("data-testid", "painted-still-loading"),
                ],
                landing::STILL_LOADING,
            ),
        ) {
            let _ = form.append_child(&line);
        }
    }

    fn form(&self, words: &Landing) -> Option<Element> {
        let form = self.element("form", &[("class", "start")])?;
        let networks = self.element("fieldset", &[("class", "networks"), ("disabled", "")])?;
        self.add(
            &networks,
            &[self.text("legend", &[], landing::NETWORK_QUESTION)],
        )?;
        let guess = NetworkLabel::guess(connection_type().as_deref());
        for network in NetworkLabel::ALL {
            let label = self.element("label", &[("class", "check")])?;
            let radio = [
                ("type", "radio"),
                ("name", "network"),
                ("value", network.name()),
            ];
            let radio = self.element("input", &radio)?;
            if network == guess {
                radio.set_attribute("checked", "").ok()?;
            }
            self.add(&label, &[Some(radio)])?;
            self.add_text(&label, network.title())?;
            self.add(&networks, &[Some(label)])?;
        }
        let consent = self.element("label", &[("class", "check consent")])?;
        self.add(
            &consent,
            &[self.element("input", &[("type", "checkbox"), ("disabled", "")])],
        )?;
        self.add_text(&consent, &words.consent)?;
        let start = [
            ("type", "button"),
            ("class", "primary big"),
            ("disabled", ""),
            ("data-testid", "painted-start"),
            ("title", landing::GETTING_READY),
        ];
        self.add(
            &form,
            &[
                Some(networks),
                Some(consent),
                self.text("button", &start, landing::START),
            ],
        )?;
        Some(form)
    }
}

/// `navigator.connection.type`, where the browser has one (Chrome on Android), read as
/// the app reads it (`network_hint` in src/pages/study.rs), so the same choice is ticked.
fn connection_type() -> Option<String> {
    let navigator = web_sys::window()?.navigator();
    let connection = js_sys::Reflect::get(&navigator, &"connection".into()).ok()?;
    if !connection.is_object() {
        return None;
    }
    js_sys::Reflect::get(&connection, &"type".into())
        .ok()?
        .as_string()
}
