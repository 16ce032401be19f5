"""The third KV tier: one file per block in a directory, named by the block's key, shared by every engine that
points at it.

The directory is its own index: a block is there when its file is, so a restarted engine, or another replica
on the same directory, finds what earlier ones wrote without any list being kept. A file appears whole or not at
all (written to a temporary file beside it, then renamed; not flushed with fsync, since a file a crash left short
fails its checks like any other).

The size cap holds however many processes write (up to six; more may pass it by a few of their writes): each
writer lists the directory once it has written a 64th of the cap since its last listing, and a listing that
finds more than nine tenths of the cap removes the least recently used files (by modification time, which a read
refreshes) down to eight tenths, passing over files another process removed first. So after any writer's
listing the folder holds at most nine tenths, and until the next one each writer adds under a 64th. A listing
costs one name per file and one stat per file the writer has not seen before, so it runs once per 64th of the
cap and never per write: at the default cap's hundreds of thousands of files, a listing per write would cost
more than the step it runs in.

A block is read in two moves, so that every rank of a tensor- or pipeline-parallel engine reads its own file
of it or none does: the engine checks each rank's file at lookup and stages it (a hard link in a staging folder
of its own, which no other process's cap removes), and each rank reads its staged file into a host slot when its
step runs. A file that fails its checks (see :mod:`block_file`) is removed and counted, and the block is
recomputed. When the directory cannot be written (full, read-only, missing), writing stops with one warning and
serving goes on; reads go on too.
"""
from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from pathlib import Path

from autoglm.runner.kv_tiers.block_file import BlockFileError, block_file_header, block_key, read_block_payload

logger = logging.getLogger(__name__)

SUFFIX = ".kvblock"
TRIM_ABOVE = 0.9  # of the cap: a listing that finds more removes files...
TRIM_TO = 0.8  # ...down to this, so that the next writes do not each trim again
LIST_EVERY = 1 / 64  # of the cap: what a writer writes between its listings of the folder
STAGING_PREFIX = ".staging-"


def staging_folder_name(engine_pid: int, engine_number: int) -> str:
    """The staging folder of engine ``engine_number`` of the process ``engine_pid`` on this host (a process may
    run several engines on one folder: the versions of a model swap)."""
    return f"{STAGING_PREFIX}{socket.gethostname()}-{engine_pid}-{engine_number}"


def remove_stale_staging(directory: Path) -> None:
    """Remove the staging folders that engines of this host left when their process ended without closing them."""
    prefix = f"{STAGING_PREFIX}{socket.gethostname()}-"
    for entry in directory.glob(f"{prefix}*"):
        pid = entry.name.removeprefix(prefix).split("-")[0]
        if pid.isdigit() and not _process_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DiskBlockStore:
    """Block files under ``directory``, at most ``capacity_bytes`` of them in all."""

    def __init__(self, directory: Path, capacity_bytes: int, identity: bytes, staging: str) -> None:
        """``identity``: what every block file of this rank's kind carries in its header (see block_file);
        ``staging``: the engine's staging folder's name (:func:`staging_folder_name`)."""
        self.directory = directory
        self.staging = directory / staging
        self.capacity_bytes = capacity_bytes
        self.identity = identity
        self.writable = True
        self.bytes_written = 0
        self.bytes_read = 0
        self.bytes_stored = 0  # as of the latest listing, with this store's writes since
        self._written_since_listing = 0
        self.num_dropped = 0  # files refused on read
        self._warned_staging = False
        self._sizes: dict[str, int] = {}  # every block file of the latest listing, by name
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._hold_cap()  # counts what earlier engines left, and trims it if the cap is lower now
        except OSError as error:
            self._stop_writing(error)

    def path(self, key: bytes) -> Path:
        return self.directory / f"{key.hex()}{SUFFIX}"

    def contains(self, key: bytes) -> bool:
        return self.path(key).is_file()

    def key(self, block_hash: bytes) -> bytes:
        return block_key(self.identity, block_hash)

    def stage(self, key: bytes, sequence: int) -> bool:
        """Check the block's file and hold it, under ``sequence``, for :meth:`take_staged`; False if the file is
        gone or fails its checks (then it is removed)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            return False  # removed by another process's cap since it was found: a miss
        try:
            read_block_payload(data, key, self.identity, None)  # its rank checks the length
        except BlockFileError as error:
            logger.warning("KV block file %s refused, the block is recomputed: %s", path.name, error)
            self.num_dropped += 1
            path.unlink(missing_ok=True)
            return False
        try:
            self.staging.mkdir(exist_ok=True)
            os.link(path, self._staged(key, sequence))
        except FileNotFoundError:
            return False  # removed since it was read: a miss
        except OSError as error:
            if not self._warned_staging:
                logger.warning("KV disk tier %s cannot stage block files (%s): every lookup there misses; a folder "
                               "on a file system with hard links serves", self.directory, error)
                self._warned_staging = True
            return False
        self.bytes_read += len(data)
        try:
            os.utime(path)  # most recently used now
        except OSError:
            pass
        return True

    def unstage(self, key: bytes, sequence: int) -> None:
        """Drop a staged file no rank will read (another rank's file of the block was missing or bad)."""
        self._staged(key, sequence).unlink(missing_ok=True)

    def take_staged(self, key: bytes, sequence: int, payload_len: int) -> bytes:
        """The payload of the file :meth:`stage` held, which is released. Checked again: a staged file is the
        checked file itself, so a failure here is a fault of the host, raised as an error."""
        staged = self._staged(key, sequence)
        data = staged.read_bytes()
        staged.unlink()
        try:
            return read_block_payload(data, key, self.identity, payload_len)
        except BlockFileError as error:
            raise RuntimeError(f"staged KV block file {staged} changed after it was checked: {error}") from error

    def remove_staging(self) -> None:
        """Remove the engine's staging folder and what is left in it (once no rank will read from it)."""
        shutil.rmtree(self.staging, ignore_errors=True)

    def _staged(self, key: bytes, sequence: int) -> Path:
        return self.staging / f"{sequence}-{key.hex()}"

    def write(self, key: bytes, payload: bytes) -> None:
        """Store a block unless it is there already, then hold the cap; gives up for good on a write error."""
        path = self.path(key)
        if not self.writable or path.exists():
            return
        data = block_file_header(key, self.identity, payload) + payload
        temporary = None
        try:
            handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".partial")
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
        except OSError as error:
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)
            self._stop_writing(error)
            return
        self.bytes_written += len(data)
        self.bytes_stored += len(data)
        self._written_since_listing += len(data)
        if self._written_since_listing >= LIST_EVERY * self.capacity_bytes:
            self._hold_cap()

    def _hold_cap(self) -> None:
        """List the folder (whoever wrote it); past TRIM_ABOVE of the cap, remove the least recently used files."""
        self._written_since_listing = 0
        names = set(os.listdir(self.directory))
        self._sizes = {name: size for name, size in self._sizes.items() if name in names}
        for name in names - self._sizes.keys():
            if not name.endswith(SUFFIX):
                continue  # another writer's temporary file
            try:
                self._sizes[name] = (self.directory / name).stat().st_size
            except FileNotFoundError:
                continue
        self.bytes_stored = sum(self._sizes.values())
        if self.bytes_stored > TRIM_ABOVE * self.capacity_bytes:
            self._trim()

    def _trim(self) -> None:
        used = []
        for name, size in self._sizes.items():
            try:
                used.append(((self.directory / name).stat().st_mtime_ns, name, size))
            except FileNotFoundError:
                continue
        total = sum(size for _, _, size in used)
        for _, name, size in sorted(used):
            if total <= TRIM_TO * self.capacity_bytes:
                break
            (self.directory / name).unlink(missing_ok=True)  # another process may have removed it first
            del self._sizes[name]
            total -= size
        self.bytes_stored = total

    def _stop_writing(self, error: OSError) -> None:
        logger.warning("KV disk tier %s cannot be written (%s): blocks are no longer offloaded to disk; "
                       "serving goes on", self.directory, error)
        self.writable = False
