//! An ESI include's transport: the channel its page reads the fragment
//! from. Heads are dropped (the page has its own), body bytes go unframed,
//! and the include can tell its page that its body failed or hand it
//! deflate data to splice into a gzip'd page.

use super::deadline::SendClock;
use super::wire::{Piece, ReadError, SendError, Transport, WireBody};
use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::os::fd::OwnedFd;
use std::time::Duration;
use tokio::sync::mpsc;

/// Where an include's body goes: its page.
pub(crate) struct Fragment {
    tx: mpsc::Sender<Piece>,
}

impl Fragment {
    pub fn new(tx: mpsc::Sender<Piece>) -> Self {
        Fragment { tx }
    }

    /// A channel nobody reads: what a client is left with once its
    /// connection was handed over.
    pub fn closed() -> Self {
        Fragment::new(mpsc::channel(1).0)
    }

    async fn send_pieces(&mut self, pieces: &[Bytes]) -> Result<(), SendError> {
        for p in pieces.iter().filter(|p| !p.is_empty()) {
            self.tx
                .send(Piece::Data(p.clone()))
                .await
                .map_err(|_| SendError::Io)?;
        }
        Ok(())
    }
}

impl Transport for Fragment {
    fn part_of_page(&self) -> bool {
        true
    }

    fn duplicate_socket(&self) -> Option<OwnedFd> {
        None
    }

    async fn send_head(
        &mut self,
        _head: &[u8],
        _wire: WireBody,
        body: &[Bytes],
        _clock: &SendClock,
    ) -> Result<(), SendError> {
        self.send_pieces(body).await
    }

    async fn send_data(
        &mut self,
        pieces: &[Bytes],
        size: u64,
        _last: bool,
        _clock: &SendClock,
    ) -> Result<u64, SendError> {
        self.send_pieces(pieces).await.map(|()| size)
    }

    async fn finish(
        &mut self,
        _trailers: &[(Bytes, Bytes)],
        _clock: &SendClock,
    ) -> Result<(), SendError> {
        Ok(())
    }

    async fn write_small(&mut self, _data: &[u8], _idle: Duration) -> Result<(), SendError> {
        Ok(())
    }

    async fn send_interim(&mut self, _heads: &[Vec<u8>], _idle: Duration) -> Result<(), SendError> {
        Ok(())
    }

    /// An include reads nothing.
    async fn read(
        &mut self,
        _rbuf: &mut BytesMut,
        _limit: impl FnOnce() -> Duration,
    ) -> Result<usize, ReadError> {
        Ok(0)
    }

    /// An include is not watched: its page cancels it.
    async fn watching<F: Future>(
        &mut self,
        _rbuf: &mut BytesMut,
        fut: F,
        _answer_half_closed: bool,
    ) -> Option<F::Output> {
        Some(fut.await)
    }

    async fn send_failed(&mut self) {
        let _ = self.tx.send(Piece::Failed).await;
    }

    async fn send_deflated(
        &mut self,
        data: Vec<Bytes>,
        crc: u32,
        len: u64,
    ) -> Result<(), SendError> {
        self.tx
            .send(Piece::Deflated { data, crc, len })
            .await
            .map_err(|_| SendError::Io)
    }
}
