//! A connection's idle time: which requests are in flight on it, and the wait until none
//! has been for the target's idle timeout.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper::body::{Frame, SizeHint};
use tokio::sync::watch;

/// Ends once no request has been in flight for `idle`.
pub(super) async fn idle_for(mut in_flight: watch::Receiver<usize>, idle: Duration) {
    loop {
        if in_flight.wait_for(|n| *n == 0).await.is_err() {
            // The connection's service is gone: so is the connection.
            return std::future::pending().await;
        }
        tokio::select! {
            biased;
            changed = in_flight.changed() => {
                if changed.is_err() {
                    return std::future::pending().await;
                }
            }
            () = tokio::time::sleep(idle) => {
                if *in_flight.borrow() == 0 {
                    return;
                }
            }
        }
    }
}

/// A request in flight on its connection, until dropped.
pub(super) struct InFlight(pub(super) Arc<watch::Sender<usize>>);

impl InFlight {
    pub(super) fn begin(counter: &Arc<watch::Sender<usize>>) -> Self {
        counter.send_modify(|n| *n += 1);
        Self(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A response body that keeps its request in flight until its last byte is out (or the
/// client has gone and the body is dropped).
pub(super) struct Guarded {
    pub(super) body: Body,
    pub(super) in_flight: Option<InFlight>,
}

impl hyper::body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.in_flight = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
