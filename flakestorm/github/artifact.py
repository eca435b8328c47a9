"""The baseline's ``results.json``, read from a report artifact's zip.

``actions/upload-artifact`` zips the report directory: ``results.json`` is at the top when the
directory itself was uploaded (the README's workflow), or one level down when several were. The
shallowest ``results.json`` is the one; two at that depth are ambiguous and refused. An artifact
is untrusted input like any other: its size is bounded before it is inflated, and the document
is read as a stream (:func:`flakestorm.results.stream.read_streamed`: its cells into spools, so a
large baseline is not held in memory), which rejects anything malformed.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePosixPath

from flakestorm.results.model import ResultsError, RunResult
from flakestorm.results.stream import NotJson, read_streamed

__all__ = ["MAX_RESULTS_BYTES", "ArtifactError", "results_from_zip"]

MAX_RESULTS_BYTES = 256 * 1024 * 1024
"""The largest ``results.json`` read from an artifact (inflated)."""

RESULTS_NAME = "results.json"


class ArtifactError(ValueError):
    """An artifact that does not hold one readable ``results.json``."""


def results_from_zip(data: bytes, max_bytes: int = MAX_RESULTS_BYTES) -> RunResult:
    """The run result in the artifact zip ``data``; raises :class:`ArtifactError`."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ArtifactError("the artifact is not a zip archive") from None
    with archive:
        found = [
            info
            for info in archive.infolist()
            if not info.is_dir() and PurePosixPath(info.filename).name == RESULTS_NAME
        ]
        if not found:
            raise ArtifactError(
                f"the artifact has no {RESULTS_NAME} (upload the report directory, "
                "as in the README's workflow)"
            )
        depth = min(len(PurePosixPath(i.filename).parts) for i in found)
        top = sorted(i.filename for i in found if len(PurePosixPath(i.filename).parts) == depth)
        if len(top) > 1:
            raise ArtifactError(
                f"the artifact has {len(top)} {RESULTS_NAME} files ({', '.join(top[:5])}): "
                "upload one report directory per artifact"
            )
        info = archive.getinfo(top[0])
        if info.file_size > max_bytes:
            raise ArtifactError(
                f"{info.filename} is {info.file_size:,} bytes (at most {max_bytes:,} are read)"
            )
        try:
            # a member is read no further than the size its header gives (zipfile stops
            # there), checked above; its cells and mutations are read as a stream into spools
            with archive.open(info) as member:
                return read_streamed(io.TextIOWrapper(member, encoding="utf-8"))
        except RecursionError:
            raise ArtifactError(f"{info.filename}: not JSON (nested too deeply)") from None
        except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
            raise ArtifactError(f"{info.filename}: cannot be extracted ({exc})") from None
        except UnicodeDecodeError as exc:
            raise ArtifactError(f"{info.filename}: not JSON ({exc})") from None
        except NotJson as exc:
            raise ArtifactError(f"{info.filename}: not JSON ({exc})") from None
        except ResultsError as exc:
            raise ArtifactError(f"{info.filename}: {exc}") from None
