//! Uploads that never lose a run (ARCHITECTURE.md, "A number's path", the upload). A finished run
//! the user chose to send is written to IndexedDB before anything is sent; it is sent with
//! its run id (the collector stores a run id once), retried with backoff while the page is
//! open, resumed on the next visit, and offered once more when the page goes away
//! (`pagehide`). Sent is only what the collector confirmed.
//!
//! Each run gets a delete token made here, before the first attempt; only its SHA-256 goes
//! to the collector, with every attempt. Whichever attempt is stored (a `keepalive` send as
//! the page went away, a retry after an answer that was lost, another tab), the token kept
//! here deletes it.
//!
//! A run is given up only when the collector says the record itself is wrong
//! ([`collector::is_final_refusal`]); anything else (no answer, a proxy's 404 during a
//! deploy, a budget) is retried with backoff, never sooner than `Retry-After` asks. Where
//! IndexedDB is unavailable (site data blocked, some private modes) the run is still sent,
//! from memory, and the page says it could not be kept.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::{Array, Promise};
use leptos::prelude::*;
use leptos::task::spawn_local;
use serde::{Deserialize, Serialize};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{IdbDatabase, IdbRequest, IdbTransactionMode, IdbVersionChangeEvent};

use crate::collector::{self, CollectorError, DeleteOutcome, Failure};
use crate::platform::{JsError, Scope};

const DATABASE: &str = "firsttoken";
const STORE: &str = "uploads";
/// Backoff between attempts: doubling from 1 s, at most a minute.
const FIRST_RETRY_MS: u32 = 1_000;
const LAST_RETRY_MS: u32 = 60_000;
/// `keepalive` requests (the page is going away) may carry at most 64 KiB, headers and all
/// in flight together.
pub const KEEPALIVE_MAX_BYTES: usize = 60_000;

/// One run to upload, as kept in IndexedDB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub run_id: String,
    /// What the study was called, to show in the list.
    pub title: String,
    /// The collector's runs endpoint, absolute.
    pub collector: String,
    /// The run record, as JSON: exactly what is sent.
    pub record: String,
    pub state: State,
    pub attempts: u32,
    pub last_error: Option<String>,
    /// When it was saved (Unix ms), to order the list.
    pub saved_at_ms: f64,
    /// The secret that deletes the run from the collector, made here; the collector has
    /// only its digest. (Absent in entries kept before the browser made tokens.)
    #[serde(default)]
    pub delete_token: Option<String>,
}

impl Entry {
    /// A pending entry for `record`, with a new delete token.
    pub fn new(run_id: String, title: String, collector: String, record: String) -> Self {
        let token: String = Scope::current()
            .random_bytes()
            .iter()
            .chain(Scope::current().random_bytes().iter())
            .map(|b| format!("{b:02x}"))
            .collect();
        Self {
            run_id,
            title,
            collector,
            record,
            state: State::Pending,
            attempts: 0,
            last_error: None,
            saved_at_ms: js_sys::Date::now(),
            delete_token: Some(token),
        }
    }

    /// The digest the collector keeps of this run's delete token.
    fn token_digest(&self) -> Option<String> {
        self.delete_token.as_deref().map(token_digest)
    }

    /// The token that deletes the stored run: one the collector made and sent, or ours.
    pub fn deleting_token(&self) -> Option<&str> {
        match &self.state {
            State::Sent {
                delete_token: Some(token),
                ..
            } => Some(token),
            _ => self.delete_token.as_deref(),
        }
    }
}

/// SHA-256 of a delete token, as 64 lowercase hex digits.
pub fn token_digest(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum State {
    /// Saved here, not yet confirmed by the collector.
    Pending,
    /// The collector confirmed it. `delete_token` is one the collector made itself (a
    /// collector that ignores the token digest), given only with the first answer.
    Sent {
        url: String,
        #[serde(default)]
        delete_token: Option<String>,
    },
    /// The collector refused it for good (the record breaks a rule); it is not retried.
    Refused { reason: String },
    /// Deleted from the collector at the user's request (or found already gone there).
    Deleted,
}

/// Why runs cannot be kept in this browser's storage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("this browser keeps no IndexedDB here (private mode may turn it off)")]
    NoIndexedDb,
    #[error("the browser's storage did not open")]
    DidNotOpen,
    #[error("IndexedDB opened something that is not a database")]
    NotADatabase,
    #[error("IndexedDB: {0}")]
    Browser(#[from] JsError),
}

/// Why a run was not deleted from the collector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeleteError {
    #[error("this run is not kept on this device")]
    NotKept,
    #[error("only a run the collector stored can be deleted from it")]
    NotStored,
    #[error("this device has no delete token for this run")]
    NoToken,
    #[error(transparent)]
    Collector(#[from] CollectorError),
}

/// The IndexedDB object store of uploads, keyed by run id.
struct Store {
    db: IdbDatabase,
}

/// Resolves when an IndexedDB request succeeds, with its result.
async fn finished(request: &IdbRequest) -> Result<JsValue, JsError> {
    let promise = Promise::new(&mut |resolve, reject| {
        let ok = request.clone();
        request.set_onsuccess(Some(
            Closure::once_into_js(move || {
                let _ = resolve.call1(&JsValue::NULL, &ok.result().unwrap_or(JsValue::UNDEFINED));
            })
            .unchecked_ref(),
        ));
        let failed = request.clone();
        request.set_onerror(Some(
            Closure::once_into_js(move || {
                let error = failed
                    .error()
                    .ok()
                    .flatten()
                    .map_or(JsValue::NULL, JsValue::from);
                let _ = reject.call1(&JsValue::NULL, &error);
            })
            .unchecked_ref(),
        ));
    });
    Ok(JsFuture::from(promise).await?)
}

impl Store {
    async fn open() -> Result<Self, StoreError> {
        let factory = web_sys::window()
            .and_then(|w| w.indexed_db().ok().flatten())
            .ok_or(StoreError::NoIndexedDb)?;
        let request = factory.open_with_u32(DATABASE, 1).map_err(JsError::from)?;
        let upgrading = request.clone();
        request.set_onupgradeneeded(Some(
            Closure::once_into_js(move |_: IdbVersionChangeEvent| {
                if let Ok(db) = upgrading.result().and_then(|r| r.dyn_into::<IdbDatabase>())
                    && !db.object_store_names().contains(STORE)
                {
                    let _ = db.create_object_store(STORE);
                }
            })
            .unchecked_ref(),
        ));
        let db = finished(&request)
            .await?
            .dyn_into::<IdbDatabase>()
            .map_err(|_| StoreError::NotADatabase)?;
        Ok(Self { db })
    }

    async fn put(&self, entry: &Entry) -> Result<(), JsError> {
        // An entry is strings and numbers: it always serializes.
        let json = serde_json::to_string(entry).unwrap_or_default();
        let tx = self
            .db
            .transaction_with_str_and_mode(STORE, IdbTransactionMode::Readwrite)?;
        let store = tx.object_store(STORE)?;
        let request =
            store.put_with_key(&JsValue::from_str(&json), &JsValue::from_str(&entry.run_id))?;
        finished(&request).await.map(|_| ())
    }

    async fn all(&self) -> Result<Vec<Entry>, JsError> {
        let tx = self.db.transaction_with_str(STORE)?;
        let store = tx.object_store(STORE)?;
        let values: Array = finished(&store.get_all()?).await?.unchecked_into();
        Ok(values
            .iter()
            .filter_map(|v| v.as_string())
            .filter_map(|json| serde_json::from_str(&json).ok())
            .collect())
    }
}

/// The page's uploads: the list the page shows, and the machinery that sends them.
#[derive(Clone)]
pub struct Uploads {
    inner: Rc<Inner>,
    /// Every upload kept here, newest first.
    pub entries: RwSignal<Vec<Entry>>,
    /// Why this browser keeps no runs (IndexedDB failed to open), if it keeps none.
    pub unavailable: RwSignal<Option<StoreError>>,
}

impl std::fmt::Debug for Uploads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uploads").finish_non_exhaustive()
    }
}

struct Inner {
    store: RefCell<Option<Rc<Store>>>,
    sending: Cell<bool>,
    retry_ms: Cell<u32>,
    retry: RefCell<Option<crate::platform::Timeout>>,
}

thread_local! {
    static UPLOADS: RefCell<Option<Uploads>> = const { RefCell::new(None) };
}

impl Uploads {
    /// The page's uploads; the first call opens the store, resumes what an earlier visit
    /// left pending, and offers pending runs again when the page goes away.
    pub fn get() -> Uploads {
        if let Some(uploads) = UPLOADS.with(|u| u.borrow().clone()) {
            return uploads;
        }
        let uploads = Uploads {
            inner: Rc::new(Inner {
                store: RefCell::new(None),
                sending: Cell::new(false),
                retry_ms: Cell::new(FIRST_RETRY_MS),
                retry: RefCell::new(None),
            }),
            entries: RwSignal::new(Vec::new()),
            unavailable: RwSignal::new(None),
        };
        UPLOADS.with(|u| *u.borrow_mut() = Some(uploads.clone()));
        let opening = uploads.clone();
        spawn_local(async move {
            match Store::open().await {
                Ok(store) => {
                    let mut entries = store.all().await.unwrap_or_default();
                    entries.sort_by(|a, b| b.saved_at_ms.total_cmp(&a.saved_at_ms));
                    opening.entries.set(entries);
                    *opening.inner.store.borrow_mut() = Some(Rc::new(store));
                    opening.send_pending();
                }
                Err(why) => opening.unavailable.set(Some(why)),
            }
        });
        uploads.flush_on_pagehide();
        uploads
    }

    /// Keeps `entry` (pending) and sends it. Saved first: a run is never only in flight.
    /// Without IndexedDB it is sent from memory all the same, and the error says that it
    /// could not be kept (it is lost if the page closes before the collector confirms).
    pub async fn add(&self, entry: Entry) -> Result<(), StoreError> {
        let kept = match self.wait_for_store().await {
            Ok(store) => store.put(&entry).await.map_err(StoreError::from),
            Err(why) => Err(why),
        };
        self.entries.update(|all| {
            all.retain(|e| e.run_id != entry.run_id);
            all.insert(0, entry);
        });
        self.inner.retry_ms.set(FIRST_RETRY_MS);
        self.send_pending();
        kept
    }

    /// Writes `entry` where it is kept, and into the list the page shows.
    async fn keep(&self, entry: &Entry) {
        let store = self.inner.store.borrow().clone();
        if let Some(store) = store {
            let _ = store.put(entry).await;
        }
        self.entries.update(|all| {
            if let Some(e) = all.iter_mut().find(|e| e.run_id == entry.run_id) {
                *e = entry.clone();
            }
        });
    }

    /// Deletes a sent run from the collector with its delete token.
    pub async fn delete(&self, run_id: &str) -> Result<(), DeleteError> {
        let entry = self
            .entries
            .with_untracked(|all| all.iter().find(|e| e.run_id == run_id).cloned())
            .ok_or(DeleteError::NotKept)?;
        let State::Sent { url, .. } = &entry.state else {
            return Err(DeleteError::NotStored);
        };
        let token = entry.deleting_token().ok_or(DeleteError::NoToken)?;
        match collector::delete_run(&Scope::current(), url, token).await? {
            DeleteOutcome::Deleted | DeleteOutcome::AlreadyGone => {}
        }
        let mut entry = entry.clone();
        entry.state = State::Deleted;
        self.keep(&entry).await;
        Ok(())
    }

    async fn wait_for_store(&self) -> Result<Rc<Store>, StoreError> {
        for _ in 0..100 {
            if let Some(store) = self.inner.store.borrow().clone() {
                return Ok(store);
            }
            if let Some(why) = self.unavailable.get_untracked() {
                return Err(why);
            }
            Scope::current().sleep(50).await;
        }
        Err(StoreError::DidNotOpen)
    }

    /// Sends every pending run, one after another; schedules another round with backoff
    /// while any stays pending.
    pub fn send_pending(&self) {
        if self.inner.sending.replace(true) {
            return;
        }
        let this = self.clone();
        spawn_local(async move {
            let pending: Vec<Entry> = this
                .entries
                .get_untracked()
                .into_iter()
                .filter(|e| e.state == State::Pending)
                .collect();
            let mut still_pending = false;
            let mut asked_wait_ms = 0;
            for mut entry in pending {
                entry.attempts += 1;
                let digest = entry.token_digest();
                match collector::upload_record(
                    &Scope::current(),
                    &entry.collector,
                    &entry.record,
                    digest.as_deref(),
                )
                .await
                {
                    Ok(stored) => {
                        entry.state = State::Sent {
                            url: stored.absolute_url(&entry.collector),
                            delete_token: stored.delete_token,
                        };
                        entry.last_error = None;
                    }
                    Err(Failure::Refused(reason)) => entry.state = State::Refused { reason },
                    // Deleted there (from another tab, or this one before it was
                    // reloaded): never written over as sent.
                    Err(Failure::Deleted(_)) => entry.state = State::Deleted,
                    Err(Failure::Retry { why, after_ms }) => {
                        entry.last_error = Some(why);
                        still_pending = true;
                        asked_wait_ms = asked_wait_ms.max(after_ms.unwrap_or(0));
                    }
                }
                this.keep(&entry).await;
            }
            this.inner.sending.set(false);
            if still_pending {
                let backoff = this.inner.retry_ms.get();
                this.inner.retry_ms.set((backoff * 2).min(LAST_RETRY_MS));
                // Never sooner than the collector asked (a budget, a deploy).
                let wait = backoff.max(asked_wait_ms);
                let again = this.clone();
                *this.inner.retry.borrow_mut() =
                    Some(Scope::current().timeout(wait, move || again.send_pending()));
            } else {
                this.inner.retry_ms.set(FIRST_RETRY_MS);
            }
        });
    }

    /// When the page goes away, pending runs are offered once more as `keepalive`
    /// requests, which the browser finishes after the page is gone. Whatever the outcome,
    /// they stay pending here until a later visit hears the collector confirm them.
    fn flush_on_pagehide(&self) {
        let entries = self.entries;
        let on_pagehide = Closure::<dyn FnMut()>::new(move || {
            for entry in entries
                .get_untracked()
                .iter()
                .filter(|e| e.state == State::Pending)
            {
                // Past the limit the browser refuses the request outright; the run stays
                // pending for the next visit instead.
                if entry.record.len() <= KEEPALIVE_MAX_BYTES {
                    let digest = entry.token_digest();
                    collector::send_keepalive(&entry.collector, &entry.record, digest.as_deref());
                }
            }
        });
        if let Some(window) = web_sys::window() {
            let _ = window
                .add_event_listener_with_callback("pagehide", on_pagehide.as_ref().unchecked_ref());
        }
        on_pagehide.forget();
    }
}
