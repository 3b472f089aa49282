//! A total deadline for each response (`--response-deadline-secs`): a client that reads
//! just fast enough to keep [`super::stall::WriteProgress`] from firing (a byte every few
//! seconds) would otherwise hold its connection and the response for as long as it
//! likes. Past the deadline the body ends with an error, and hyper closes the connection.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::Sleep;

use crate::AppState;

/// A response body that ends with an error once its deadline has passed.
struct Deadline {
    inner: Body,
    sleep: Pin<Box<Sleep>>,
    secs: u64,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        // The deadline first: a body with data always ready would otherwise never end
        // for a client that reads slowly (it is polled only as fast as the client reads).
        if self.sleep.as_mut().poll(cx).is_ready() {
            let secs = self.secs;
            return Poll::Ready(Some(Err(axum::Error::new(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the response took longer than {secs} s: closing its connection"),
            )))));
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Gives `response` its deadline, counted from now (its head is ready).
pub async fn limit(State(state): State<AppState>, response: Response) -> Response {
    let secs = state.config.response_deadline_secs.max(1);
    response.map(|inner| {
        Body::new(Deadline {
            inner,
            sleep: Box::pin(tokio::time::sleep(Duration::from_secs(secs))),
            secs,
        })
    })
}
