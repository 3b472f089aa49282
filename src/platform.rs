//! The browser's global scope: a page (`Window`) or the engine's dedicated Worker. Both
//! have the same `fetch`, `performance`, timers and `crypto`, so neither the engine nor the
//! pages care which they run in.

use js_sys::Promise;
use wasm_bindgen::prelude::*;
use web_sys::{Performance, RequestInit, Window, WorkerGlobalScope};

/// Where `fetch`, `performance.now()`, timers and random bytes come from.
#[derive(Debug, Clone)]
pub enum Scope {
    Window(Window),
    Worker(WorkerGlobalScope),
}

impl Scope {
    /// The scope this code runs in.
    pub fn current() -> Self {
        let global = js_sys::global();
        match global.dyn_into::<Window>() {
            Ok(window) => Scope::Window(window),
            Err(global) => Scope::Worker(global.unchecked_into()),
        }
    }

    /// The monotonic clock every timestamp comes from.
    pub fn performance(&self) -> Performance {
        let performance = match self {
            Scope::Window(w) => w.performance(),
            Scope::Worker(w) => w.performance(),
        };
        // Every browser firsttoken runs in has had `performance` in both scopes since 2015.
        performance.expect("performance is available in windows and workers")
    }

    /// `fetch(url, init)`.
    pub fn fetch(&self, url: &str, init: &RequestInit) -> Promise {
        match self {
            Scope::Window(w) => w.fetch_with_str_and_init(url, init),
            Scope::Worker(w) => w.fetch_with_str_and_init(url, init),
        }
    }

    /// Calls `callback` after `ms` milliseconds; dropping the returned guard cancels it.
    pub fn timeout(&self, ms: u32, callback: impl FnOnce() + 'static) -> Timeout {
        let closure = Closure::once(callback);
        let function = closure.as_ref().unchecked_ref();
        let ms = i32::try_from(ms).unwrap_or(i32::MAX);
        let id = match self {
            Scope::Window(w) => {
                w.set_timeout_with_callback_and_timeout_and_arguments_0(function, ms)
            }
            Scope::Worker(w) => {
                w.set_timeout_with_callback_and_timeout_and_arguments_0(function, ms)
            }
        }
        .ok();
        Timeout {
            scope: self.clone(),
            id,
            _closure: closure,
        }
    }

    /// Resolves after `ms` milliseconds.
    pub async fn sleep(&self, ms: u32) {
        let ms = i32::try_from(ms).unwrap_or(i32::MAX);
        let promise = Promise::new(&mut |resolve, _reject| {
            let _ = match self {
                Scope::Window(w) => {
                    w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms)
                }
                Scope::Worker(w) => {
                    w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms)
                }
            };
        });
        let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
    }

    /// Calls `callback` every `ms` milliseconds until the returned guard is dropped.
    pub fn every(&self, ms: u32, callback: impl FnMut() + 'static) -> Every {
        let closure = Closure::<dyn FnMut()>::new(callback);
        let handle = self.set_interval(&closure, i32::try_from(ms).unwrap_or(i32::MAX));
        Every {
            scope: self.clone(),
            handle,
            _closure: closure,
        }
    }

    /// `setInterval(callback, ms)`; `None` when the browser refused.
    pub fn set_interval(&self, callback: &Closure<dyn FnMut()>, ms: i32) -> Option<i32> {
        let function = callback.as_ref().unchecked_ref();
        match self {
            Scope::Window(w) => {
                w.set_interval_with_callback_and_timeout_and_arguments_0(function, ms)
            }
            Scope::Worker(w) => {
                w.set_interval_with_callback_and_timeout_and_arguments_0(function, ms)
            }
        }
        .ok()
    }

    pub fn clear_interval(&self, handle: i32) {
        match self {
            Scope::Window(w) => w.clear_interval_with_handle(handle),
            Scope::Worker(w) => w.clear_interval_with_handle(handle),
        }
    }

    /// The origin this code runs on (a worker has its page's origin).
    pub fn origin(&self) -> String {
        match self {
            Scope::Window(w) => w.location().origin().unwrap_or_default(),
            Scope::Worker(w) => w.location().origin(),
        }
    }

    /// Whether this is a worker (not a page).
    pub fn is_worker(&self) -> bool {
        matches!(self, Scope::Worker(_))
    }

    /// 16 random bytes from `crypto.getRandomValues`, which (unlike `crypto.randomUUID`)
    /// also works on plain-HTTP pages.
    pub fn random_bytes(&self) -> [u8; 16] {
        let crypto = match self {
            Scope::Window(w) => w.crypto(),
            Scope::Worker(w) => w.crypto(),
        };
        let mut bytes = [0u8; 16];
        // `getRandomValues` only fails for requests over 65536 bytes.
        crypto
            .and_then(|c| c.get_random_values_with_u8_array(&mut bytes))
            .expect("crypto.getRandomValues gives 16 bytes");
        bytes
    }
}

/// A pending `setTimeout`; cleared when dropped.
#[derive(Debug)]
pub struct Timeout {
    scope: Scope,
    id: Option<i32>,
    _closure: Closure<dyn FnMut()>,
}

impl Drop for Timeout {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            match &self.scope {
                Scope::Window(w) => w.clear_timeout_with_handle(id),
                Scope::Worker(w) => w.clear_timeout_with_handle(id),
            }
        }
    }
}

/// A repeating timer from [`Scope::every`]; cleared when dropped.
#[derive(Debug)]
pub struct Every {
    scope: Scope,
    handle: Option<i32>,
    _closure: Closure<dyn FnMut()>,
}

impl Drop for Every {
    fn drop(&mut self) {
        if let Some(handle) = self.handle {
            self.scope.clear_interval(handle);
        }
    }
}

/// What a rejected promise or a thrown value said: `TypeError: Failed to fetch`.
pub fn js_error_text(value: &JsValue) -> String {
    match value.dyn_ref::<js_sys::Error>() {
        Some(error) => String::from(error.to_string()),
        None => value.as_string().unwrap_or_else(|| format!("{value:?}")),
    }
}

/// A browser API threw or rejected; the text is what it said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JsError(pub String);

impl From<JsValue> for JsError {
    fn from(value: JsValue) -> Self {
        JsError(js_error_text(&value))
    }
}
