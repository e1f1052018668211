"""The temporary files of atomic saves: locked while written, removed once abandoned.

``md.save`` writes ``.NAME.minidl-XXXXXXXX.tmp`` beside its target ``NAME`` and renames it
over the target when complete. A process killed in the middle (SIGKILL, the OOM killer, a
power cut) cannot remove its temporary, so each save first removes the abandoned
temporaries of its own target.

*Abandoned* is decided by a lock, not by age or process id: the writer holds an exclusive
``flock`` on its temporary from just after creating it until it has been renamed or
removed, and the kernel drops that lock when the process dies, however it dies. A save
removes only a temporary whose lock it can take without waiting, so it never touches one
that another process, or another thread, is still writing (an flock belongs to an open
file, so two opens of the same file exclude each other even within one process), and pid
reuse cannot fool it. The one window, a temporary removed between its creation and its
writer taking the lock, is closed by the writer: once it holds the lock it checks that its
file still has a name, and starts again with a new one if not.

Where flock is unavailable (Windows, a filesystem without locks) nothing is locked and no
temporary is removed by another save: one is removed only when it is provably abandoned.
"""
import os
import re
import stat
import tempfile

try:
    import fcntl
except ImportError:    # Windows
    fcntl = None

_INFIX = ".minidl-"
_SUFFIX = ".tmp"


def _prefix(base):
    return f".{base}{_INFIX}"


def create(directory, base):
    """A new temporary for the target ``base`` in ``directory``, locked: ``(fd, path, lock)``.
    ``fd`` is for writing (the caller closes it); ``lock``, another descriptor of the same
    open file, keeps the lock held after ``fd`` is closed: pass it to ``release`` once the
    temporary has been renamed or removed."""
    while True:
        fd, path = tempfile.mkstemp(dir=directory, prefix=_prefix(base), suffix=_SUFFIX)
        try:
            if _lock(fd) and os.fstat(fd).st_nlink == 0:
                os.close(fd)    # a concurrent save removed it before we held the lock
                continue
            return fd, path, os.dup(fd)
        except BaseException:
            os.close(fd)
            _unlink(path)
            raise


def release(lock):
    os.close(lock)


def remove_abandoned(directory, base):
    """Remove the temporaries of saves to ``base`` whose writers are gone. Best effort: a
    temporary that cannot be examined is left alone, and nothing here raises."""
    if fcntl is None:
        return
    pattern = re.compile(re.escape(_prefix(base)) + r"[A-Za-z0-9_]+" + re.escape(_SUFFIX) + r"\Z")
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if pattern.match(name):
            _remove_if_unlocked(os.path.join(directory, name))


def _lock(fd):
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    except OSError:     # a filesystem without locks: proceed unlocked (and nobody cleans up)
        return False


def _remove_if_unlocked(path):
    # O_RDWR: where flock is emulated with fcntl locks (NFS), an exclusive lock needs write access
    flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held = os.fstat(fd)
        now = os.stat(path, follow_symlinks=False)
        if stat.S_ISREG(held.st_mode) and (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
            os.unlink(path)
    except OSError:     # locked by a save in progress, already gone, or no locks here: leave it
        pass
    finally:
        os.close(fd)


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass
