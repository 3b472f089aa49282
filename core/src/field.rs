//! The error every rule of the contract gives: which field breaks it, by its path
//! (`samples[3].ttft_ms`, `targets[0].url`), and why. The plan, the share link and the
//! record all name their fields this way, so a person reads one kind of message.

/// A value that breaks a rule, with the path of the offending field
/// (`samples[3].ttft_ms`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    pub field: String,
    pub message: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error for a field inside `parent`: `levels[1]` within `phases[2]` is
    /// `phases[2].levels[1]`; an error about the whole of it names `parent` alone.
    pub fn within(self, parent: &str) -> Self {
        Self {
            field: if self.field.is_empty() {
                parent.to_owned()
            } else {
                format!("{parent}.{}", self.field)
            },
            message: self.message,
        }
    }
}
