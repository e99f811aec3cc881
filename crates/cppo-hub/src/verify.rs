//! What the Hub says a file is, and whether a file on disk is it: the size, and the hash the Hub uses as
//! the file's etag (SHA-256 of the content for LFS files, the git blob SHA-1 for the others).

use std::io::Read;
use std::path::Path;

use sha1::Sha1;
use sha2::{Digest, Sha256};

/// One file of a repository at one commit, as the Hub's listing gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteFile {
    pub path: String,
    pub size: Option<u64>,
    pub hash: Option<FileHash>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileHash {
    /// LFS files: SHA-256 of the content, lower-case hex.
    Sha256(String),
    /// Files kept in git: SHA-1 of `blob <size>\0<content>`, lower-case hex.
    GitBlob(String),
}

impl FileHash {
    /// The name `huggingface_hub` gives the file's blob in the cache.
    pub fn etag(&self) -> &str {
        match self {
            FileHash::Sha256(h) | FileHash::GitBlob(h) => h,
        }
    }
}

/// Only the size: cheap enough to check every cached file against the listing.
pub fn size_mismatch(path: &Path, file: &RemoteFile) -> Option<String> {
    let expected = file.size?;
    match std::fs::metadata(path) {
        Ok(m) if m.len() == expected => None,
        Ok(m) => Some(format!("{} bytes, expected {expected}", m.len())),
        Err(e) => Some(format!("cannot read it: {e}")),
    }
}

/// Size and hash: for a file just downloaded, before anything may load it.
pub fn mismatch(path: &Path, file: &RemoteFile) -> Option<String> {
    if let Some(problem) = size_mismatch(path, file) {
        return Some(problem);
    }
    let hash = file.hash.as_ref()?;
    let got = match hash_file(path, hash) {
        Ok(got) => got,
        Err(e) => return Some(format!("cannot read it: {e}")),
    };
    let expected = hash.etag();
    (!got.eq_ignore_ascii_case(expected)).then(|| {
        let kind = match hash {
            FileHash::Sha256(_) => "SHA-256",
            FileHash::GitBlob(_) => "git blob SHA-1",
        };
        format!("{kind} {got}, expected {expected}")
    })
}

fn hash_file(path: &Path, hash: &FileHash) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut buf = vec![0u8; 1 << 20];
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    match hash {
        FileHash::Sha256(_) => {
            let mut h = Sha256::new();
            loop {
                let n = file.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
            Ok(hex(&h.finalize()))
        }
        FileHash::GitBlob(_) => {
            let mut h = Sha1::new();
            h.update(format!("blob {len}\0").as_bytes());
            loop {
                let n = file.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
            Ok(hex(&h.finalize()))
        }
    }
}

/// The git blob id of `bytes` (what the Hub reports for a file kept in git).
pub fn git_blob_sha1(bytes: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", bytes.len()).as_bytes());
    h.update(bytes);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 of `bytes`, lower-case hex (an LFS file's etag).
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
