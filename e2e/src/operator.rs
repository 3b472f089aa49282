//! What the operator does on the compose page, as the end-to-end tests do it: kept here
//! so that every test makes a link the same way.

use std::time::Duration;

use thirtyfour::prelude::*;

use crate::browser::Browser;

impl Browser {
    /// Presses *Make the link* on the compose page and returns the share link it shows.
    pub async fn make_link(&self, timeout: Duration) -> anyhow::Result<String> {
        self.driver
            .find(By::Css("[data-testid=make-link]"))
            .await?
            .click()
            .await?;
        Ok(self
            .wait_for_count("[data-testid=share-link]", 1, timeout)
            .await?[0]
            .prop("value")
            .await?
            .unwrap_or_default())
    }
}
