//! Pieces of the UI that draw measurements; they read samples and never measure.

pub mod axis;
pub mod cdf_chart;
pub mod layers;
pub mod live;
pub mod report_view;
pub mod samples_table;
pub mod summary;
pub mod uploads_list;
pub mod waterfall;

pub use samples_table::SamplesTable;
pub use summary::Summary;
