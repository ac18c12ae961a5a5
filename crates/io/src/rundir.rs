//! Private run directories: where labs keep node configs, reports, ready
//! files and RETHER control sockets.
//!
//! A lab runs as root and writes files that root later executes from
//! (node configs name a namespace, a report path, a control socket). A
//! predictable name in a shared directory such as `/tmp` lets any local
//! user plant a directory or a symlink there first and have root write
//! through it. So (threat model: docs/security.md):
//!
//! - the base is `/run/qosnet` for root (in `/run`, which only root can
//!   write), `$XDG_RUNTIME_DIR/qosnet` for other users, and only where
//!   neither can be used a randomly named directory in the temporary
//!   directory; `QOSNET_RUNTIME_DIR` overrides the base;
//! - every base and run directory is checked, not assumed: a real
//!   directory (never a symlink), owned by the caller, writable by nobody
//!   else;
//! - a run directory is created with one `mkdir(2)` of a name with a random
//!   part, mode 0700, so it is new and the caller's;
//! - files inside it are created with `O_CREAT | O_EXCL | O_NOFOLLOW` and
//!   read back with `O_NOFOLLOW` after checking their owner.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a path cannot be trusted or used.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is a symbolic link; qosnet never follows links in its run directories (remove it)")]
    Symlink { path: PathBuf },
    #[error("{path} is not a {want}")]
    WrongType { path: PathBuf, want: &'static str },
    #[error(
        "{path} belongs to uid {owner}, not to uid {me} who runs qosnet (remove it, or run as its owner)"
    )]
    Owner { path: PathBuf, owner: u32, me: u32 },
    #[error("{path} has mode {mode:o}: others may write it (chmod go-w it, or remove it)")]
    Writable { path: PathBuf, mode: u32 },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunDirError + '_ {
    move |source| RunDirError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The caller's effective uid.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Who may own what qosnet trusts: the caller, and root (a root-owned
/// directory or socket is as trusted as the caller's own, since root can
/// do anything the caller can).
fn trusted_owner(uid: u32) -> bool {
    uid == euid() || uid == 0
}

/// `path` is a real directory (not a symlink), owned by a trusted user
/// and not writable by group or others.
pub fn check_private_dir(path: &Path) -> Result<(), RunDirError> {
    let m = std::fs::symlink_metadata(path).map_err(io_err(path))?;
    if m.file_type().is_symlink() {
        return Err(RunDirError::Symlink { path: path.into() });
    }
    if !m.is_dir() {
        return Err(RunDirError::WrongType {
            path: path.into(),
            want: "directory",
        });
    }
    check_owner_mode(path, &m)
}

fn check_owner_mode(path: &Path, m: &std::fs::Metadata) -> Result<(), RunDirError> {
    if !trusted_owner(m.uid()) {
        return Err(RunDirError::Owner {
            path: path.into(),
            owner: m.uid(),
            me: euid(),
        });
    }
    if m.mode() & 0o022 != 0 {
        return Err(RunDirError::Writable {
            path: path.into(),
            mode: m.mode() & 0o7777,
        });
    }
    Ok(())
}

/// Create `path` (mode 0700) if it is missing, then check it as
/// [`check_private_dir`] does: an existing one is used only if it is a
/// private directory of a trusted owner.
fn ensure_private_dir(path: &Path) -> Result<(), RunDirError> {
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(path)(e)),
    }
    check_private_dir(path)
}

/// Where run directories go, in order of preference; the first usable
/// one wins ([`base`]).
fn candidates() -> Vec<PathBuf> {
    if let Some(d) = std::env::var_os("QOSNET_RUNTIME_DIR") {
        return vec![PathBuf::from(d)];
    }
    let mut c = Vec::new();
    if euid() == 0 {
        c.push(PathBuf::from("/run/qosnet"));
    } else if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        c.push(PathBuf::from(x).join("qosnet"));
    }
    c
}

/// The base directory of run directories: `QOSNET_RUNTIME_DIR` if set
/// (which must be usable), else `/run/qosnet` for root or
/// `$XDG_RUNTIME_DIR/qosnet` for others, created 0700 if missing. `None`:
/// none of them is usable, and run directories go into the temporary
/// directory under random names. A base that exists but is not private
/// (another owner, a symlink, writable by others) is an error, never
/// silently replaced by another place.
pub fn base() -> Result<Option<PathBuf>, RunDirError> {
    let explicit = std::env::var_os("QOSNET_RUNTIME_DIR").is_some();
    for c in candidates() {
        match ensure_private_dir(&c) {
            Ok(()) => return Ok(Some(c)),
            // No /run (a container), or $XDG_RUNTIME_DIR gone: use the
            // temporary directory, safely.
            Err(RunDirError::Io { source, .. })
                if !explicit
                    && matches!(
                        source.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                    ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// A run directory of this process: created new (mode 0700, the caller's)
/// under [`base`], removed with its contents when dropped unless
/// [`RunDir::keep`] was called.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    keep: bool,
}

impl RunDir {
    /// A new run directory named `qosnet-TAG-` and a random part. `tag`
    /// is a lab prefix or a tool's name: letters, digits, `-` and `_`.
    pub fn create(tag: &str) -> Result<RunDir, RunDirError> {
        let parent = base()?.unwrap_or_else(std::env::temp_dir);
        RunDir::create_in(&parent, tag)
    }

    /// [`RunDir::create`] in `parent` (which must be private, or the
    /// sticky temporary directory).
    pub fn create_in(parent: &Path, tag: &str) -> Result<RunDir, RunDirError> {
        // tempfile makes the directory with one mkdir of a random name
        // (retried on a clash), mode 0700: never an existing one.
        let t = tempfile::Builder::new()
            .prefix(&dir_prefix(tag))
            .rand_bytes(RAND_LEN)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(parent)
            .map_err(io_err(parent))?;
        let path = t.keep();
        check_private_dir(&path)?;
        Ok(RunDir { path, keep: false })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `self.path()/name`.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Leave the directory in place when dropped.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Write `name` in the directory: a new file (0600), never an
    /// existing one and never through a link.
    pub fn write_new(&self, name: &str, contents: &[u8]) -> Result<PathBuf, RunDirError> {
        let p = self.join(name);
        write_new(&p, contents)?;
        Ok(p)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Create `path` (0600) with `contents`: fails if anything, a link
/// included, is already there.
pub fn write_new(path: &Path, contents: &[u8]) -> Result<(), RunDirError> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err(path))?;
    f.write_all(contents).map_err(io_err(path))
}

/// Replace `path` with `contents` atomically: written to a new file
/// beside it, then renamed over it (rename replaces a link, never follows
/// it). For files a reader polls, such as reports.
pub fn replace(path: &Path, contents: &[u8]) -> Result<(), RunDirError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut t = tempfile::Builder::new()
        .prefix(".qosnet-")
        .tempfile_in(dir)
        .map_err(io_err(dir))?;
    t.write_all(contents).map_err(io_err(path))?;
    t.persist(path).map_err(|e| io_err(path)(e.error))?;
    Ok(())
}

/// Read `path`: a regular file, not a link, owned by a trusted user.
pub fn read_trusted(path: &Path) -> Result<String, RunDirError> {
    let mut f = open_nofollow(path)?;
    let m = f.metadata().map_err(io_err(path))?;
    if !m.is_file() {
        return Err(RunDirError::WrongType {
            path: path.into(),
            want: "regular file",
        });
    }
    if !trusted_owner(m.uid()) {
        return Err(RunDirError::Owner {
            path: path.into(),
            owner: m.uid(),
            me: euid(),
        });
    }
    let mut s = String::new();
    f.read_to_string(&mut s).map_err(io_err(path))?;
    Ok(s)
}

fn open_nofollow(path: &Path) -> Result<File, RunDirError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                RunDirError::Symlink { path: path.into() }
            } else {
                io_err(path)(e)
            }
        })
}

/// `path` is a Unix socket (not a link) owned by a trusted user, in a
/// private directory of a trusted user.
pub fn check_socket(path: &Path) -> Result<(), RunDirError> {
    if let Some(dir) = path.parent() {
        check_private_dir(dir)?;
    }
    let m = std::fs::symlink_metadata(path).map_err(io_err(path))?;
    if m.file_type().is_symlink() {
        return Err(RunDirError::Symlink { path: path.into() });
    }
    if !m.file_type().is_socket() {
        return Err(RunDirError::WrongType {
            path: path.into(),
            want: "Unix socket",
        });
    }
    if !trusted_owner(m.uid()) {
        return Err(RunDirError::Owner {
            path: path.into(),
            owner: m.uid(),
            me: euid(),
        });
    }
    Ok(())
}

/// Random characters after a run directory's prefix.
const RAND_LEN: usize = 8;

/// `qosnet-TAG-`, with anything but letters, digits, `-` and `_` in
/// `tag` replaced by `_`: the start of a run directory's name.
fn dir_prefix(tag: &str) -> String {
    let clean: String = tag
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("qosnet-{clean}-")
}

/// The run directories of `tag` that this user may trust, where
/// [`RunDir::create`] makes them; and, for error messages, those refused
/// with why.
pub fn find(tag: &str) -> (Vec<PathBuf>, Vec<RunDirError>) {
    match base() {
        Ok(b) => find_in(&b.unwrap_or_else(std::env::temp_dir), tag),
        Err(e) => (Vec::new(), vec![e]),
    }
}

/// [`find`] in `parent`: exactly `qosnet-TAG-` and the random part, so
/// that lab `a` never takes lab `a-b`'s directories for its own.
fn find_in(parent: &Path, tag: &str) -> (Vec<PathBuf>, Vec<RunDirError>) {
    let want = dir_prefix(tag);
    let (mut ok, mut refused) = (Vec::new(), Vec::new());
    let Ok(rd) = std::fs::read_dir(parent) else {
        return (ok, refused);
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = name
            .strip_prefix(&want)
            .is_some_and(|r| r.len() == RAND_LEN && r.chars().all(|c| c.is_ascii_alphanumeric()));
        if !ours {
            continue;
        }
        match check_private_dir(&e.path()) {
            Ok(()) => ok.push(e.path()),
            Err(err) => refused.push(err),
        }
    }
    ok.sort();
    (ok, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_directory_is_new_private_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("base");
        ensure_private_dir(&base).unwrap();
        let p;
        {
            let r = RunDir::create_in(&base, "lab/../x").unwrap();
            p = r.path().to_path_buf();
            assert!(p.starts_with(&base), "{p:?}");
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.starts_with("qosnet-lab____x-"), "{name}");
            let m = std::fs::metadata(&p).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o700);
            let f = r.write_new("a.toml", b"x").unwrap();
            assert_eq!(read_trusted(&f).unwrap(), "x");
            // Never twice, never through a link.
            assert!(r.write_new("a.toml", b"y").is_err());
            let victim = d.path().join("victim");
            std::fs::write(&victim, "keep").unwrap();
            std::os::unix::fs::symlink(&victim, r.join("b.toml")).unwrap();
            assert!(r.write_new("b.toml", b"overwritten").is_err());
            assert!(matches!(
                read_trusted(&r.join("b.toml")),
                Err(RunDirError::Symlink { .. })
            ));
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        }
        assert!(!p.exists());
    }

    /// Lab `a` finds its own directory, not lab `a-b`'s (the old
    /// `PREFIX-PID` names checked that the rest was a number).
    #[test]
    fn a_lab_finds_only_its_own_directories() {
        let d = tempfile::tempdir().unwrap();
        let a = RunDir::create_in(d.path(), "a").unwrap();
        let _ab = RunDir::create_in(d.path(), "a-b").unwrap();
        assert_eq!(find_in(d.path(), "a").0, vec![a.path().to_path_buf()]);
        assert_eq!(find_in(d.path(), "a-b").0.len(), 1);
        assert!(find_in(d.path(), "b").0.is_empty());
    }

    #[test]
    fn shared_or_linked_bases_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            ensure_private_dir(&open),
            Err(RunDirError::Writable { .. })
        ));
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        assert!(matches!(
            ensure_private_dir(&link),
            Err(RunDirError::Symlink { .. })
        ));
        let file = d.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(
            ensure_private_dir(&file),
            Err(RunDirError::WrongType { .. })
        ));
        // Another user's directory, as a local user would plant it.
        if euid() == 0 {
            let theirs = d.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            assert!(matches!(
                ensure_private_dir(&theirs),
                Err(RunDirError::Owner { owner: 65534, .. })
            ));
        }
    }
}
