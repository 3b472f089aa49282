//! The app's pages: the operator's composer (`/`), the beta user's study page
//! (`/run#v1.…`), and the crowd's results (`/results`).

pub mod compose;
pub mod results;
pub mod study;

pub use compose::ComposePage;
pub use results::ResultsPage;
pub use study::StudyPage;
