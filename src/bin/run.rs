//! The beta user's bundle (`run.html`): the study page and, in its Web Worker, the engine.

fn main() {
    firsttoken::start(firsttoken::RunApp);
}
