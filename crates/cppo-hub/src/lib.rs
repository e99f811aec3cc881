//! Hugging Face Hub names as local files. `org/name[@revision]` for models and
//! `org/name[@revision][:config][:split]` for datasets resolve through the Hugging Face cache
//! (`HF_HUB_CACHE` / `HF_HOME`, the `models--org--name/{blobs,refs,snapshots}` layout that
//! transformers reads and writes), and what the cache lacks is downloaded with `hf-hub` (`HF_ENDPOINT`,
//! `HF_TOKEN`) unless `HF_HUB_OFFLINE` forbids it. Every download is checked against the Hub's size and
//! hash before it is returned; nothing reaches the network when the cache has what was asked for.

#![forbid(unsafe_code)]

pub mod cache;
pub mod client;
pub mod dataset;
pub mod error;
#[cfg(feature = "fake-hub")]
pub mod fake_hub;
pub mod model;
mod progress;
pub mod repo;
pub mod settings;
pub mod verify;

pub use client::{Hub, Listing};
pub use dataset::select_files;
pub use error::{HubError, Result};
pub use model::missing_model_files;
pub use repo::{DataSelector, DatasetRef, RepoId, RepoKind};
pub use settings::{HubSettings, DEFAULT_ENDPOINT, OFFLINE_ENV};
