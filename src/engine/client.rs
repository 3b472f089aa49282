//! The page's handle on the engine. The engine runs in a dedicated Web Worker that runs
//! the page's own compiled bundle; where a worker cannot start, the same engine runs on
//! the page, and the run records that it did.

use std::cell::RefCell;
use std::rc::Rc;

use firsttoken_core::plan::Plan;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;
use web_sys::{
    Blob, BlobPropertyBag, ErrorEvent, HtmlLinkElement, MessageEvent, Url, Worker, WorkerOptions,
    WorkerType,
};

use super::control::Drawn;
use super::protocol::{FromEngine, ToEngine};
use super::runner::{Controls, run_plan};
use super::worker::{from_js, to_js};
use crate::platform::{JsError, Scope};

/// A running measurement.
pub enum Engine {
    Worker {
        worker: Worker,
        _on_message: Closure<dyn FnMut(MessageEvent)>,
        _on_error: Closure<dyn FnMut(ErrorEvent)>,
    },
    Page(Controls),
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Engine::Worker { .. } => "Engine::Worker",
            Engine::Page(_) => "Engine::Page",
        })
    }
}

type Handler = Rc<RefCell<dyn FnMut(FromEngine)>>;

/// Where the engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Its own Web Worker: the page's drawing cannot delay its timestamps.
    Worker,
    /// The page's own thread: where a worker buys nothing (WebKit), and for comparison
    /// (`?engine=page`). The page says when it has drawn the running view, and the first
    /// request waits for that.
    Page,
}

impl Engine {
    /// Starts `plan` where `placement` says (on the page if no worker can start); every
    /// message the engine sends goes to `on_message`. `hidden` is the page's visibility now.
    pub fn start(
        plan: Plan,
        tag: String,
        hidden: bool,
        placement: Placement,
        on_message: impl FnMut(FromEngine) + 'static,
    ) -> Self {
        let handler: Handler = Rc::new(RefCell::new(on_message));
        if placement == Placement::Page {
            return Self::start_on_page(plan, tag, hidden, handler);
        }
        match start_worker(plan.clone(), tag.clone(), hidden, handler.clone()) {
            Ok(engine) => engine,
            Err(why) => {
                web_sys::console::warn_1(&format!("measuring on the page: {why}").into());
                Self::start_on_page(plan, tag, hidden, handler)
            }
        }
    }

    /// The same engine on the page's own thread (used where no worker can start, and by
    /// the browser tests).
    fn start_on_page(plan: Plan, tag: String, hidden: bool, handler: Handler) -> Self {
        let controls = Controls {
            drawn: Drawn::awaited_from_the_start(),
            ..Controls::default()
        };
        let scope = Scope::current();
        controls.visibility.set(hidden, scope.performance().now());
        let run_controls = controls.clone();
        spawn_local(async move {
            run_plan(&scope, &plan, &tag, &run_controls, |message| {
                (handler.borrow_mut())(message)
            })
            .await;
        });
        Engine::Page(controls)
    }

    /// Whether the engine runs on the page's own thread.
    pub fn on_page(&self) -> bool {
        matches!(self, Engine::Page(_))
    }

    pub fn cancel(&self) {
        match self {
            Engine::Worker { worker, .. } => post(worker, &ToEngine::Cancel),
            Engine::Page(controls) => controls.cancel.cancel(),
        }
    }

    /// The page has drawn every sample it was sent: the engine may start the next request.
    pub fn drawn(&self) {
        match self {
            Engine::Worker { worker, .. } => post(worker, &ToEngine::Drawn),
            Engine::Page(controls) => controls.drawn.drawn(),
        }
    }

    pub fn set_hidden(&self, hidden: bool) {
        match self {
            Engine::Worker { worker, .. } => post(worker, &ToEngine::Visibility { hidden }),
            Engine::Page(controls) => controls
                .visibility
                .set(hidden, Scope::current().performance().now()),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        match self {
            Engine::Worker { worker, .. } => worker.terminate(),
            Engine::Page(controls) => controls.cancel.cancel(),
        }
    }
}

fn post(worker: &Worker, message: &ToEngine) {
    match to_js(message) {
        Ok(value) => {
            let _ = worker.post_message(&value);
        }
        Err(e) => web_sys::console::error_1(&e.to_string().into()),
    }
}

/// Why the engine could not start in a worker (it then measures on the page).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum WorkerError {
    #[error("the page names no script to load")]
    NoScript,
    #[error("this browser has no module workers")]
    NoModuleWorkers,
    #[error("the worker did not start: {0}")]
    Browser(#[from] JsError),
}

/// Starts the worker: a module worker that imports the page's own script (Trunk's
/// `modulepreload` link, so the base path is in it; from the browser's cache) and is
/// handed the page's own compiled wasm module, whose `main` serves the engine when there
/// is no window ([`crate::start`]). The worker downloads nothing and compiles nothing: a
/// second compile of the bundle (Firefox optimizes a whole module on background threads)
/// took the cores for the first requests and made one read 113 ms late. Messages sent
/// before the worker says Ready would be lost, so the plan is sent in answer to Ready.
fn start_worker(
    plan: Plan,
    tag: String,
    hidden: bool,
    handler: Handler,
) -> Result<Engine, WorkerError> {
    let script = own_script().ok_or(WorkerError::NoScript)?;
    if !module_workers() {
        return Err(WorkerError::NoModuleWorkers);
    }
    let source = js_sys::Array::of1(
        &format!(
            "import init from {script:?};\n\
             self.onmessage = (event) => {{\n  \
             self.onmessage = null;\n  \
             init({{ module_or_path: event.data }});\n\
             }};\n"
        )
        .into(),
    );
    let options = BlobPropertyBag::new();
    options.set_type("text/javascript");
    let blob = Blob::new_with_str_sequence_and_options(&source, &options).map_err(JsError::from)?;
    let url = Url::create_object_url_with_blob(&blob).map_err(JsError::from)?;
    let worker_options = WorkerOptions::new();
    worker_options.set_type(WorkerType::Module);
    let worker = Worker::new_with_options(&url, &worker_options).map_err(JsError::from)?;
    let _ = Url::revoke_object_url(&url);
    worker
        .post_message(&wasm_bindgen::module())
        .map_err(JsError::from)?;

    let pending = RefCell::new(Some((plan, tag)));
    let on_message = {
        let worker = worker.clone();
        let handler = handler.clone();
        Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            match from_js::<FromEngine>(event.data()) {
                Ok(FromEngine::Ready) => {
                    if let Some((plan, tag)) = pending.borrow_mut().take() {
                        post(&worker, &ToEngine::Visibility { hidden });
                        post(&worker, &ToEngine::Start { plan, tag });
                    }
                }
                Ok(message) => (handler.borrow_mut())(message),
                Err(e) => web_sys::console::error_1(&e.to_string().into()),
            }
        })
    };
    let on_error = Closure::<dyn FnMut(ErrorEvent)>::new(move |event: ErrorEvent| {
        web_sys::console::error_1(
            &format!("the measuring worker failed: {}", event.message()).into(),
        );
    });
    worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    Ok(Engine::Worker {
        worker,
        _on_message: on_message,
        _on_error: on_error,
    })
}

/// The absolute URL of this page's script, from the link Trunk writes in the page's head
/// (the server has put its base path in it).
fn own_script() -> Option<String> {
    let document = web_sys::window()?.document()?;
    let link: HtmlLinkElement = document
        .query_selector("link[rel=modulepreload]")
        .ok()??
        .dyn_into()
        .ok()?;
    Some(link.href()).filter(|h| !h.is_empty())
}

/// Whether this browser starts module workers (Firefox before 114 and Safari before 15
/// do not, and would run the worker's `import` as a classic script, which fails after
/// the worker has started). The test is the usual one: a browser that knows worker
/// types reads the options' `type`.
fn module_workers() -> bool {
    let asked = std::rc::Rc::new(std::cell::Cell::new(false));
    let getter = {
        let asked = asked.clone();
        Closure::<dyn FnMut() -> JsValue>::new(move || {
            asked.set(true);
            JsValue::from_str("classic")
        })
    };
    let options = js_sys::Object::new();
    let descriptor = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&descriptor, &"get".into(), getter.as_ref());
    let _ = js_sys::Object::define_property(&options, &"type".into(), &descriptor);
    let empty = Blob::new_with_str_sequence(&js_sys::Array::new())
        .ok()
        .and_then(|blob| Url::create_object_url_with_blob(&blob).ok());
    if let Some(url) = empty {
        if let Ok(worker) = Worker::new_with_options(&url, options.unchecked_ref()) {
            worker.terminate();
        }
        let _ = Url::revoke_object_url(&url);
    }
    asked.get()
}
