"""One verified fetch for every upstream file: sha256-checked, mirror-aware, cached.

With ``NODEGROUND_MIRROR`` set, a file is read from ``$NODEGROUND_MIRROR/<url
without scheme>`` (raw.githubusercontent.com URLs are also looked up under
their github.com/OWNER/REPO/raw/BRANCH/PATH form). Otherwise pooch downloads
it (resumable, checksum-verified). A checksum mismatch is always an error, and
a failed file is never left in the cache.

A catalog file whose sha256 could not be known when the catalog was written is
marked ``sha256 = "unverified"``: its first download is hashed and recorded in
the lock file (``$NODEGROUND_CACHE/catalog.lock``, or ``$NODEGROUND_LOCK``), and
every later fetch verifies against that recorded hash. The lock lives beside the
cache it vouches for, never in the checkout: a run writes nothing into the source
tree (read-only installs, images). To pin a hash for everyone, write it into
``datasets/catalog.toml``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pooch

from contract.errors import UserError
from contract.weights import cache_dir

UNVERIFIED = "unverified"


class FetchError(RuntimeError, UserError):
    """A file could not be obtained or did not verify."""


class ChecksumError(FetchError):
    """A file was obtained but its sha256 is not the one recorded: never a file to use, never "just unreachable"."""


def lock_path() -> Path:
    env = os.environ.get("NODEGROUND_LOCK")
    return Path(env) if env else cache_dir() / "catalog.lock"


def read_lock(path: Path | None = None) -> dict[str, str]:
    """url -> sha256 recorded at first download (lines: ``<sha256>  <url>``)."""
    path = path or lock_path()
    if not path.exists():
        return {}
    recorded = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            digest, _, url = line.partition("  ")
            recorded[url.strip()] = digest.strip()
    return recorded


def record_lock(url: str, sha256: str, path: Path | None = None) -> None:
    path = path or lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        ""
        if path.exists()
        else (
            "# sha256 recorded at the first download of catalog files marked unverified.\n"
            "# Format: <sha256>  <url>. Later downloads must match; to pin one for everyone, write it into "
            "datasets/catalog.toml.\n"
        )
    )
    with path.open("a") as f:
        f.write(f"{header}{sha256}  {url}\n")


def resolve_sha256(url: str, declared: str) -> str | None:
    """The hash a file must have: the catalog's, else the lock's; None if neither is known yet."""
    if declared and declared != UNVERIFIED:
        return declared
    return read_lock().get(url)


def mirror_dir() -> Path | None:
    root = os.environ.get("NODEGROUND_MIRROR")
    return Path(root).expanduser().resolve() if root else None


def mirror_candidates(url: str, mirror: Path) -> list[Path]:
    parsed = urlparse(url)
    paths = [mirror / parsed.netloc / parsed.path.lstrip("/")]
    if parsed.netloc == "raw.githubusercontent.com":
        owner, repo, branch, *rest = parsed.path.lstrip("/").split("/")
        paths.append(mirror / "github.com" / owner / repo / "raw" / branch / "/".join(rest))
    return paths


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_local(url: str, sha256: str) -> bool:
    """Whether ``fetch`` can serve ``url`` without the network: a kept download or a mirror copy.

    Existence only (no hashing), so listing every catalog task stays instant; ``fetch``
    still verifies the bytes when it uses them.
    """
    known = resolve_sha256(url, sha256)
    if known is not None and any((cache_dir() / "files" / known[:2]).glob(f"{known}-*")):
        return True
    mirror = mirror_dir()
    return mirror is not None and any(c.exists() for c in mirror_candidates(url, mirror))


def fetch(url: str, sha256: str, dest: Path | None = None, lock: bool = True) -> Path:
    """Return a local, verified copy of ``url`` (at ``dest`` if given).

    ``sha256`` may be ``"unverified"``: then the lock file's hash is used, or,
    on a first download, the file's hash is recorded there; ``lock=False`` leaves
    the lock alone, for a caller that verifies the file by other means (a Git blob id).
    """
    known = resolve_sha256(url, sha256) if lock or sha256 != UNVERIFIED else None
    if known is None:
        return _fetch_first(url, dest, lock)
    sha256 = known
    dest = dest or cache_dir() / "files" / sha256[:2] / f"{sha256}-{Path(urlparse(url).path).name}"
    if dest.exists() and sha256_of(dest) == sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    mirror = mirror_dir()
    if mirror is not None:
        for candidate in mirror_candidates(url, mirror):
            if candidate.exists():
                actual = sha256_of(candidate)
                if actual != sha256:
                    raise ChecksumError(
                        f"checksum mismatch for {candidate} (from {url}): expected sha256 {sha256}, got {actual}"
                    )
                partial = dest.with_name(dest.name + ".part")
                shutil.copyfile(candidate, partial)
                partial.replace(dest)
                return dest
    try:
        downloaded = pooch.retrieve(
            url, known_hash=f"sha256:{sha256}", fname=dest.name, path=dest.parent, progressbar=False
        )
    except ValueError as exc:  # pooch's hash mismatch
        raise ChecksumError(f"checksum mismatch for {url}: {exc}") from None
    except Exception as exc:  # network errors of every kind
        where = (
            f"; not in the mirror either (looked for {mirror_candidates(url, mirror)[0]})"
            if mirror
            else ("; set NODEGROUND_MIRROR to a mirror directory to work offline")
        )
        raise FetchError(f"could not download {url}: {type(exc).__name__}: {exc}{where}") from None
    return Path(downloaded)


def _fetch_first(url: str, dest: Path | None, lock: bool = True) -> Path:
    """First download of a file with no known hash: hash it, record it, keep it."""
    staging = cache_dir() / "files" / "unverified"
    staging.mkdir(parents=True, exist_ok=True)
    name = Path(urlparse(url).path).name or "download"
    mirror = mirror_dir()
    source = next((c for c in mirror_candidates(url, mirror) if c.exists()), None) if mirror else None
    partial = staging / f"{name}.part"
    try:
        if source is not None:
            shutil.copyfile(source, partial)
        else:
            try:
                got = pooch.retrieve(url, known_hash=None, fname=partial.name, path=staging, progressbar=False)
            except Exception as exc:
                where = (
                    f"; not in the mirror either (looked for {mirror_candidates(url, mirror)[0]})"
                    if mirror
                    else ("; set NODEGROUND_MIRROR to a mirror directory to work offline")
                )
                raise FetchError(f"could not download {url}: {type(exc).__name__}: {exc}{where}") from None
            partial = Path(got)
        digest = sha256_of(partial)
        final = dest or cache_dir() / "files" / digest[:2] / f"{digest}-{name}"
        final.parent.mkdir(parents=True, exist_ok=True)
        partial.replace(final)
    finally:
        partial.unlink(missing_ok=True)
    if lock:
        record_lock(url, digest)
    return final
