//! The end-to-end tests, as one test binary (one link of the server, the browser client
//! and their dependencies instead of one per file): the built app in real browsers
//! against real servers on loopback ports. Each module is one subject; helpers shared by
//! several live in the `firsttoken-e2e` library (`e2e/src/`).

mod engines;
mod layers;
mod lifecycle;
mod one_file;
mod painted;
mod proxy;
mod results_page;
mod study_page;
mod target_check;
