//! The engine's side of its dedicated Web Worker: it runs the plan it is sent and posts
//! every message back. A worker has its own thread, so drawing charts on the page can
//! never delay reading the stream (a timestamp taken late is a wrong TTFT).

use serde::Serialize;
use serde::de::DeserializeOwned;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

use super::control::Drawn;
use super::protocol::{FromEngine, ToEngine};
use super::runner::{Controls, run_plan};
use crate::platform::Scope;

/// Serializes a message as one JSON string. A string crosses `postMessage` as one value;
/// an object graph (a sample holds dozens of small objects) would be garbage in the
/// worker's heap, and a garbage collection in the worker is a pause in every timestamp
/// taken meanwhile.
pub fn to_js<T: Serialize>(message: &T) -> Result<JsValue, MessageError> {
    serde_json::to_string(message)
        .map(|json| JsValue::from_str(&json))
        .map_err(|e| MessageError::Write(e.to_string()))
}

pub fn from_js<T: DeserializeOwned>(value: JsValue) -> Result<T, MessageError> {
    let json = value.as_string().ok_or(MessageError::NotAString)?;
    serde_json::from_str(&json).map_err(|e| MessageError::Read(e.to_string()))
}

/// A message between the page and the engine that could not be sent or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error("cannot send a message: {0}")]
    Write(String),
    #[error("cannot read a message: it is not a string")]
    NotAString,
    #[error("cannot read a message: {0}")]
    Read(String),
}

/// Listens for [`ToEngine`] messages in this worker; says [`FromEngine::Ready`] once it
/// does. One worker serves one run.
pub fn serve() {
    let global: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let scope = Scope::current();
    // The page that started this worker draws every sample and says when it has.
    let controls = Controls {
        drawn: Drawn::awaited(),
        ..Controls::default()
    };
    let post = {
        let global = global.clone();
        move |message: FromEngine| match to_js(&message) {
            Ok(value) => {
                let _ = global.post_message(&value);
            }
            Err(e) => web_sys::console::error_1(&e.to_string().into()),
        }
    };
    let on_message = {
        let post = post.clone();
        Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            match from_js::<ToEngine>(event.data()) {
                Ok(ToEngine::Start { plan, tag }) => {
                    let (scope, controls, post) = (scope.clone(), controls.clone(), post.clone());
                    spawn_local(async move {
                        run_plan(&scope, &plan, &tag, &controls, post).await;
                    });
                }
                Ok(ToEngine::Cancel) => controls.cancel.cancel(),
                Ok(ToEngine::Visibility { hidden }) => {
                    controls.visibility.set(hidden, scope.performance().now())
                }
                Ok(ToEngine::Drawn) => controls.drawn.drawn(),
                Err(e) => web_sys::console::error_1(&e.to_string().into()),
            }
        })
    };
    global.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The worker lives as long as the page keeps it; so does its message handler.
    on_message.forget();
    post(FromEngine::Ready);
}
