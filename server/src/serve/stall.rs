//! A connection whose writes must make progress: a client that stops reading (a zero TCP
//! window) leaves the server's writes waiting, and without a bound it would hold its
//! connection, the response's memory and, for a file, a descriptor for ever; a few
//! networks doing it take every place. [`WriteProgress`] fails a write that has waited
//! longer than its limit, and hyper then closes the connection.
//!
//! Only a write that is waiting counts: a stream with nothing to send (the demo before its
//! first token, an idle keep-alive connection) is not stalled, and the header-read timeout
//! covers a client that sends nothing.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `S` with each write given `limit` to make progress.
#[derive(Debug)]
pub struct WriteProgress<S> {
    inner: S,
    limit: Duration,
    /// Armed while a write waits: when it fires, the write fails.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteProgress<S> {
    pub fn new(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            deadline: None,
        }
    }

    /// What a write (or flush, or shutdown) of the inner stream polled: done, the
    /// deadline goes; pending, it is armed if it is not, and once it has passed the write
    /// fails.
    fn progress<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.deadline = None;
            return polled;
        }
        let limit = self.limit;
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + limit)));
        ready!(deadline.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the client read nothing for {} s: closing its connection",
                limit.as_secs()
            ),
        )))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteProgress<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteProgress<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progress(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progress(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.progress(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.progress(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A write into a pipe nobody reads fails after the limit; one that is read goes on.
    #[tokio::test(start_paused = true)]
    async fn a_write_nobody_reads_fails_after_the_limit() {
        let (near, _far) = tokio::io::duplex(16);
        let mut stalled = WriteProgress::new(near, Duration::from_secs(30));
        let started = Instant::now();
        let error = stalled.write_all(&[0; 64]).await.expect_err("nobody reads");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed().as_secs(), 30);

        let (near, mut far) = tokio::io::duplex(16);
        let mut read = WriteProgress::new(near, Duration::from_secs(30));
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut far, &mut all)
                .await
                .map(|_| all.len())
        });
        // Slow, but moving: 16 bytes every 20 s never waits 30 s for one write.
        for _ in 0..4 {
            read.write_all(&[1; 16])
                .await
                .expect("read by the other side");
            tokio::time::sleep(Duration::from_secs(20)).await;
        }
        read.shutdown().await.expect("closed");
        drop(read);
        assert_eq!(reader.await.expect("joined").expect("read"), 64);
    }
}
