//! firsttoken-pages: what the browser's pages work out without drawing, kept apart from
//! the app so that it is tested natively.
//!
//! The page the app runs on ([`page`]), the target check before a link goes out ([`check`]), provider presets ([`presets`]),
//! the compose form's study ([`compose`]), the downloaded record's layout ([`pretty`]), the landing page a link opens ([`landing`]) and
//! its QR code ([`qr`]), a run's time left ([`progress`]), its report ([`report`], with
//! the readings only a report makes in [`readings`], and its wait in layers in [`split`]), the before/after reading
//! ([`compare`]), and the coarse description of the browser ([`client`]).

pub mod check;
pub mod client;
pub mod compare;
pub mod compose;
pub mod landing;
pub mod page;
pub mod presets;
pub mod pretty;
pub mod progress;
pub mod qr;
pub mod readings;
pub mod report;
pub mod split;
