//! A Hub on 127.0.0.1 for tests, serving repositories in the Hub's layout: the listing API
//! (`/api/{models,datasets}/org/name/revision/rev?blobs=true`), resolve URLs with the Hub's headers
//! (`X-Repo-Commit`, `ETag` / `X-Linked-Etag`, `X-Error-Code`), LFS files behind a redirect to a
//! content-addressed URL, ranges (206) for resumed downloads, gated repositories, renamed repositories
//! (a relative redirect), and on request a transfer cut short or a corrupted body.
//!
//! It is written on `std::net` rather than with an HTTP server crate because the tests need it to
//! misbehave on purpose (close a connection mid-body after promising the full length), which servers
//! built to be correct do not offer.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::repo::RepoKind;
use crate::verify::{git_blob_sha1, sha256_hex};

/// Extensions the fake Hub stores as LFS files (redirected, SHA-256 etag), as the Hub's default
/// `.gitattributes` does.
const LFS_EXTENSIONS: [&str; 5] = [".safetensors", ".parquet", ".bin", ".gguf", ".arrow"];

#[derive(Clone, Debug)]
pub struct SeenRequest {
    /// The path without the query.
    pub path: String,
    pub range: Option<String>,
    pub authorization: Option<String>,
}

struct FakeFile {
    bytes: Arc<Vec<u8>>,
    lfs: bool,
    sha256: String,
    git_sha1: String,
}

struct FakeRepo {
    commit: String,
    files: BTreeMap<String, FakeFile>,
    /// Downloads need `Authorization: Bearer <token>`.
    gate: Option<String>,
}

#[derive(Default)]
struct State {
    repos: HashMap<(RepoKind, String), FakeRepo>,
    renamed: HashMap<(RepoKind, String), String>,
    requests: Vec<SeenRequest>,
    /// Per file path: the next body served stops after this many bytes.
    cuts: HashMap<String, usize>,
    /// Per file path: this many next bodies are served with a changed byte.
    corruptions: HashMap<String, usize>,
}

pub struct FakeHub {
    endpoint: String,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeHub {
    /// Listens on a free port of 127.0.0.1 until dropped.
    pub fn start() -> FakeHub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let endpoint = format!("http://{}", listener.local_addr().expect("local address"));
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (state, stop, endpoint) = (state.clone(), stop.clone(), endpoint.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (state, endpoint) = (state.clone(), endpoint.clone());
                    std::thread::spawn(move || serve(stream, &state, &endpoint));
                }
            })
        };
        FakeHub {
            endpoint,
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// The value for `HF_ENDPOINT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Adds (or replaces) a repository with these files at one commit, which it returns.
    pub fn add_repo(&self, kind: RepoKind, id: &str, files: &[(&str, Vec<u8>)]) -> String {
        let mut stored = BTreeMap::new();
        let mut digest = format!("{}:{id}", kind.plural()).into_bytes();
        for (path, bytes) in files {
            let file = FakeFile {
                lfs: LFS_EXTENSIONS.iter().any(|e| path.ends_with(e)),
                sha256: sha256_hex(bytes),
                git_sha1: git_blob_sha1(bytes),
                bytes: Arc::new(bytes.clone()),
            };
            digest.extend_from_slice(path.as_bytes());
            digest.extend_from_slice(file.sha256.as_bytes());
            stored.insert(path.to_string(), file);
        }
        let commit = git_blob_sha1(&digest);
        self.lock().repos.insert(
            (kind, id.to_owned()),
            FakeRepo {
                commit: commit.clone(),
                files: stored,
                gate: None,
            },
        );
        commit
    }

    /// Makes downloads of a repository need `token`.
    pub fn gate(&self, kind: RepoKind, id: &str, token: &str) {
        if let Some(repo) = self.lock().repos.get_mut(&(kind, id.to_owned())) {
            repo.gate = Some(token.to_owned());
        }
    }

    /// Serves `new_id` under `old_id` too, through a relative redirect, as the Hub does after a rename.
    pub fn rename(&self, kind: RepoKind, old_id: &str, new_id: &str) {
        self.lock().renamed.insert((kind, old_id.to_owned()), new_id.to_owned());
    }

    /// The next transfer of the file at `path` (in any repository) stops after `after` bytes, with the
    /// connection closed although the full length was promised.
    pub fn cut_next(&self, path: &str, after: usize) {
        self.lock().cuts.insert(path.to_owned(), after);
    }

    /// The next `times` transfers of the file at `path` carry one changed byte.
    pub fn corrupt_next(&self, path: &str, times: usize) {
        self.lock().corruptions.insert(path.to_owned(), times);
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.lock().requests.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for FakeHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.endpoint.trim_start_matches("http://"));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Arc<Vec<u8>>,
    range: Option<(usize, usize)>,
    /// Stop writing the body after this many bytes.
    cut: Option<usize>,
    corrupt: bool,
}

impl Answer {
    fn empty(status: u16) -> Answer {
        Answer {
            status,
            headers: vec![],
            body: Arc::new(vec![]),
            range: None,
            cut: None,
            corrupt: false,
        }
    }

    fn error(status: u16, code: &str, message: &str) -> Answer {
        let mut a = Answer::empty(status);
        a.headers.push(("X-Error-Code".into(), code.into()));
        a.headers.push(("X-Error-Message".into(), message.into()));
        a
    }

    fn header(mut self, k: &str, v: impl Into<String>) -> Answer {
        self.headers.push((k.to_owned(), v.into()));
        self
    }
}

fn serve(mut stream: TcpStream, state: &Mutex<State>, endpoint: &str) {
    let Some((path, headers)) = read_head(&stream) else { return };
    let range_header = headers.get("range").cloned();
    let answer = {
        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
        st.requests.push(SeenRequest {
            path: path.split('?').next().unwrap_or_default().to_owned(),
            range: range_header.clone(),
            authorization: headers.get("authorization").cloned(),
        });
        route(&mut st, &path, &headers, endpoint)
    };
    let _ = write_answer(&mut stream, answer);
    let _ = stream.shutdown(Shutdown::Both);
}

fn read_head(stream: &TcpStream) -> Option<(String, HashMap<String, String>)> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut words = line.split_whitespace();
    let (_method, path) = (words.next()?, words.next()?.to_owned());
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    Some((path, headers))
}

fn decode(s: &str) -> String {
    s.replace("%2F", "/").replace("%2f", "/")
}

fn route(st: &mut State, full_path: &str, headers: &HashMap<String, String>, endpoint: &str) -> Answer {
    let (path, query) = full_path.split_once('?').unwrap_or((full_path, ""));
    let path = path.trim_start_matches('/');
    // /api/{models,datasets}/org/name/revision/rev
    if let Some(rest) = path.strip_prefix("api/") {
        let (kind, rest) = match rest.split_once('/') {
            Some(("models", r)) => (RepoKind::Model, r),
            Some(("datasets", r)) => (RepoKind::Dataset, r),
            _ => return Answer::error(404, "", "unknown API"),
        };
        let Some((id, revision)) = rest.split_once("/revision/") else {
            return Answer::error(404, "", "unknown API");
        };
        if let Some(new) = st.renamed.get(&(kind, id.to_owned())) {
            let target = format!("/api/{}/{new}/revision/{revision}?{query}", kind.plural());
            return Answer::empty(307).header("Location", target);
        }
        return listing(st, kind, id, &decode(revision));
    }
    // /cdn/<sha256>: the content-addressed store LFS resolves redirect to.
    if let Some(sha) = path.strip_prefix("cdn/") {
        let found = st
            .repos
            .values()
            .flat_map(|r| r.files.iter())
            .find(|(_, f)| f.sha256 == sha)
            .map(|(p, f)| (p.clone(), f.bytes.clone()));
        return match found {
            Some((file_path, bytes)) => body(st, &file_path, bytes, headers),
            None => Answer::error(404, "", "no such object"),
        };
    }
    // [datasets/]org/name/resolve/rev/path
    let (kind, rest) = match path.strip_prefix("datasets/") {
        Some(r) => (RepoKind::Dataset, r),
        None => (RepoKind::Model, path),
    };
    let mut parts = rest.splitn(5, '/');
    let (org, name, verb, revision, file) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        decode(parts.next().unwrap_or_default()),
        parts.next().unwrap_or_default().to_owned(),
    );
    if verb != "resolve" {
        return Answer::error(404, "", "not a resolve URL");
    }
    let id = format!("{org}/{name}");
    if let Some(new) = st.renamed.get(&(kind, id.clone())) {
        let prefix = if kind == RepoKind::Dataset { "/datasets" } else { "" };
        let target = format!("{prefix}/{new}/resolve/{}/{file}", revision.replace('/', "%2F"));
        return Answer::empty(307).header("Location", target);
    }
    let Some(repo) = st.repos.get(&(kind, id.clone())) else {
        return Answer::error(404, "RepoNotFound", "Repository not found");
    };
    if let Some(token) = &repo.gate {
        if headers.get("authorization") != Some(&format!("Bearer {token}")) {
            return Answer::error(401, "GatedRepo", "Access to this repository is restricted: you must be authenticated and have accepted its conditions.");
        }
    }
    if revision != "main" && revision != repo.commit {
        return Answer::error(404, "RevisionNotFound", "Invalid rev id");
    }
    let Some(f) = repo.files.get(&file) else {
        return Answer::error(404, "EntryNotFound", "Entry not found");
    };
    let commit = repo.commit.clone();
    if f.lfs {
        return Answer::empty(302)
            .header("Location", format!("{endpoint}/cdn/{}", f.sha256))
            .header("X-Repo-Commit", commit)
            .header("X-Linked-Etag", format!("\"{}\"", f.sha256))
            .header("X-Linked-Size", f.bytes.len().to_string())
            .header("ETag", format!("\"{}\"", f.git_sha1));
    }
    let (etag, bytes) = (f.git_sha1.clone(), f.bytes.clone());
    body(st, &file, bytes, headers)
        .header("X-Repo-Commit", commit)
        .header("ETag", format!("\"{etag}\""))
}

fn listing(st: &State, kind: RepoKind, id: &str, revision: &str) -> Answer {
    let Some(repo) = st.repos.get(&(kind, id.to_owned())) else {
        return Answer::error(404, "RepoNotFound", "Repository not found");
    };
    if revision != "main" && revision != repo.commit {
        return Answer::error(404, "RevisionNotFound", "Invalid rev id");
    }
    let siblings: Vec<serde_json::Value> = repo
        .files
        .iter()
        .map(|(path, f)| {
            let mut v = serde_json::json!({ "rfilename": path, "blobId": f.git_sha1, "size": f.bytes.len() });
            if f.lfs {
                v["lfs"] = serde_json::json!({ "sha256": f.sha256, "size": f.bytes.len(), "pointerSize": 132 });
            }
            v
        })
        .collect();
    let json = serde_json::json!({ "id": id, "sha": repo.commit, "siblings": siblings });
    let mut a = Answer::empty(200).header("Content-Type", "application/json");
    a.body = Arc::new(json.to_string().into_bytes());
    a
}

/// A file's bytes, or the range asked for (206), with any pending cut or corruption of that file
/// applied, except to the one-byte probes that only read headers.
fn body(st: &mut State, file_path: &str, bytes: Arc<Vec<u8>>, headers: &HashMap<String, String>) -> Answer {
    let len = bytes.len();
    let range = headers.get("range").and_then(|r| {
        let spec = r.strip_prefix("bytes=")?;
        let (a, b) = spec.split_once('-')?;
        let start: usize = a.parse().ok()?;
        let end: usize = if b.is_empty() { len.saturating_sub(1) } else { b.parse().ok()? };
        Some((start, end.min(len.saturating_sub(1))))
    });
    let probe = range.is_some_and(|(a, b)| a == 0 && b == 0);
    let mut a = Answer::empty(if range.is_some() { 206 } else { 200 });
    a.body = bytes;
    a.range = range;
    if !probe {
        a.cut = st.cuts.remove(file_path);
        if let Some(n) = st.corruptions.get_mut(file_path) {
            if *n > 0 {
                *n -= 1;
                a.corrupt = true;
            }
        }
    }
    a.header("Accept-Ranges", "bytes")
}

fn write_answer(stream: &mut TcpStream, a: Answer) -> std::io::Result<()> {
    let reason = match a.status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        307 => "Temporary Redirect",
        401 => "Unauthorized",
        404 => "Not Found",
        _ => "Status",
    };
    let mut body: Vec<u8> = match a.range {
        Some((start, end)) if start < a.body.len() => a.body[start..=end].to_vec(),
        Some(_) => vec![],
        None => a.body.to_vec(),
    };
    if a.corrupt && !body.is_empty() {
        let mid = body.len() / 2;
        body[mid] ^= 0x5a;
    }
    let mut head = format!("HTTP/1.1 {} {reason}\r\n", a.status);
    for (k, v) in &a.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some((start, end)) = a.range {
        head.push_str(&format!("Content-Range: bytes {start}-{end}/{}\r\n", a.body.len()));
    }
    head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes())?;
    let sent = a.cut.map_or(body.len(), |n| n.min(body.len()));
    stream.write_all(&body[..sent])?;
    stream.flush()
}
