"""One verified fetch for every upstream file: sha256-checked, mirror-aware, cached.

With ``NODEGROUND_MIRROR`` set, a file is read from ``$NODEGROUND_MIRROR/<url
without scheme>`` (raw.githubusercontent.com URLs are also looked up under
their github.com/OWNER/REPO/raw/BRANCH/PATH form). Otherwise pooch downloads
it (resumable, checksum-verified). A checksum mismatch is always an error, and
a failed file is never left in the cache.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pooch


class FetchError(RuntimeError):
    """A file could not be obtained or did not verify."""


def cache_dir() -> Path:
    root = os.environ.get("NODEGROUND_CACHE") or Path.home() / ".cache" / "nodeground"
    return Path(root)


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


def fetch(url: str, sha256: str, dest: Path | None = None) -> Path:
    """Return a local, verified copy of ``url`` (at ``dest`` if given)."""
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
                    raise FetchError(f"checksum mismatch for {candidate} (from {url}): expected sha256 {sha256}, got {actual}")
                partial = dest.with_name(dest.name + ".part")
                shutil.copyfile(candidate, partial)
                partial.replace(dest)
                return dest
    try:
        downloaded = pooch.retrieve(url, known_hash=f"sha256:{sha256}", fname=dest.name, path=dest.parent, progressbar=False)
    except ValueError as exc:  # pooch's hash mismatch
        raise FetchError(f"checksum mismatch for {url}: {exc}") from None
    except Exception as exc:  # network errors of every kind
        where = f"; not in the mirror either (looked for {mirror_candidates(url, mirror)[0]})" if mirror else (
            "; set NODEGROUND_MIRROR to a mirror directory to work offline"
        )
        raise FetchError(f"could not download {url}: {type(exc).__name__}: {exc}{where}") from None
    return Path(downloaded)
