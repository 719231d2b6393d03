//! Output files the CLI rewrites or appends to (`sweep --out`, `merge -o`): what path is
//! written, who may write it, and how it is replaced.
//!
//! - **The target** ([`target`]): a symbolic link is followed to the file it names (which may
//!   not exist yet), so the link stays a link and its target gets the new contents. Anything
//!   else that is not a regular file (a character or block device such as `/dev/null` or
//!   `/dev/full`, a FIFO, a socket, a directory) is refused: renaming over it would replace
//!   the device node, and appending to it could lose rows or hang.
//! - **One writer** ([`open_locked`]): an exclusive advisory lock (`flock(2)`, via
//!   `File::try_lock`) on the target itself, held until the file handle is dropped. A second
//!   `autoplan` process that wants to write the same file fails at once; nothing else is
//!   locked out (readers, editors). No lock file is left behind.
//! - **Whole replacement** ([`replace`]): the new contents go to `NAME.tmp` beside the target
//!   (same directory, hence same filesystem: the rename is atomic), are synced, take the old
//!   file's permissions, and are renamed over the target; a kill leaves the old file or the
//!   new one (and at worst a stale `NAME.tmp`, replaced by the next run).
//!
//! Refusals are `std::io::Error`s (kinds `InvalidInput`, `WouldBlock`), so callers report them
//! as I/O errors; the caller adds the path the user gave.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};

/// Symbolic links followed before giving up: Linux's own limit (`MAXSYMLINKS`), so a loop
/// fails here as it would in `open(2)`.
const MAX_LINKS: usize = 40;

/// Attempts to lock the file the path names when it is replaced between our open and our
/// lock (another writer finishing its rename). Each retry needs such a rename to happen in
/// that window again; 8 consecutive ones mean something is replacing the file in a loop.
const LOCK_ATTEMPTS: usize = 8;

/// The file written for the output path `path`: `path` itself, or the file its chain of
/// symbolic links ends at (relative links resolved against the link's directory). It may not
/// exist yet; if it exists it is a regular file, anything else is refused.
pub fn target(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        match fs::symlink_metadata(&p) {
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(p),
            Err(e) => return Err(e),
            Ok(m) if m.file_type().is_symlink() => {
                let link = fs::read_link(&p)?;
                // `join` keeps an absolute link as is.
                p = match p.parent() {
                    Some(dir) => dir.join(link),
                    None => link,
                };
            }
            Ok(m) if m.is_file() => return Ok(p),
            Ok(m) => return Err(not_regular(&p, path, &m.file_type())),
        }
    }
    Err(io::Error::new(
        ErrorKind::InvalidInput,
        format!("more than {MAX_LINKS} symbolic links (a loop?)"),
    ))
}

/// What a non-regular file is, in words.
fn kind(t: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

fn not_regular(p: &Path, given: &Path, t: &fs::FileType) -> io::Error {
    let what = kind(t);
    let via = if p == given {
        String::new()
    } else {
        format!(" (the symbolic link points to {})", p.display())
    };
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("is {what}{via}, not a regular file: outputs are written only to regular files"),
    )
}

/// Open the regular file `target` (from [`target`]; created empty if missing) for reading and
/// writing, without truncating it, under an exclusive advisory lock held until the handle is
/// dropped. Another holder is a `WouldBlock` error, at once (no waiting).
pub fn open_locked(target: &Path) -> io::Result<File> {
    for _ in 0..LOCK_ATTEMPTS {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(target)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            // Replaced by a device or the like since `target` looked.
            return Err(not_regular(target, target, &meta.file_type()));
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    ErrorKind::WouldBlock,
                    "another autoplan process (a sweep or a merge) is writing this file and \
                     holds its lock; wait for it to finish, or write elsewhere (two writers \
                     would interleave rows)",
                ))
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
        // The previous holder may have renamed a new file over the path between our open
        // and our lock: then we hold the lock of a file no longer there; open again.
        if same_file(&meta, target)? {
            return Ok(file);
        }
    }
    Err(io::Error::other(format!(
        "replaced {LOCK_ATTEMPTS} times while being locked: another process keeps rewriting it"
    )))
}

/// Whether the path still names the file `meta` describes.
#[cfg(unix)]
fn same_file(meta: &fs::Metadata, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    match fs::metadata(path) {
        Ok(now) => Ok(now.dev() == meta.dev() && now.ino() == meta.ino()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn same_file(_meta: &fs::Metadata, _path: &Path) -> io::Result<bool> {
    Ok(true)
}

/// Replace the contents of `target` (from [`target`]: a regular file or a missing one) by
/// `text` atomically, as the module docs say. Hold the target's lock ([`open_locked`]) across
/// the call where another writer could race.
pub fn replace(target: &Path, text: &str) -> io::Result<()> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut name: OsString = target
        .file_name()
        .ok_or_else(|| io::Error::new(ErrorKind::InvalidInput, "names no file"))?
        .to_owned();
    name.push(".tmp");
    let tmp = dir.join(name);
    // A stale one from a killed run (or a link someone left there): never write through it.
    match fs::remove_file(&tmp) {
        Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let write = || -> io::Result<()> {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        if let Ok(old) = fs::metadata(target) {
            f.set_permissions(old.permissions())?;
        }
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, target)
    };
    if let Err(e) = write() {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // Make the rename itself durable; a filesystem that cannot sync a directory loses
    // nothing that the rename did not already risk.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
