//! The operator's bundle (`index.html`): make a link, read the results.

fn main() {
    firsttoken::start(firsttoken::App);
}
