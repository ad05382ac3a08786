"""Which files a list of paths names: folders walked, hidden entries and links, file types.

A folder is walked for its files (sub-folders too, unless ``recursive=False``);
hidden files and folders (name starting with ``.``) are ignored. A symbolic link
inside a folder is followed only to a target inside that folder, and each folder
is walked once (by device and inode), so a link out of the folder, a loop, or a
second way into a folder already walked is never followed, and each such link is
listed in ``IngestReport.links_skipped`` with why. A path given by the caller is
read wherever it points: the caller named it. Files of an unsupported type, and
entries that are not regular files, are listed in ``IngestReport.files_skipped``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langchain_knowledge_inject.errors import IngestError

if TYPE_CHECKING:
    from langchain_knowledge_inject._ingest.loading import IngestReport

FileType = Literal["text", "markdown", "html", "pdf"]

SUPPORTED_EXTENSIONS: Mapping[str, FileType] = {
    ".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown",
    ".html": "html", ".htm": "html", ".pdf": "pdf",
}  # fmt: skip
"""File extensions that ``ingest`` reads, and the loader each one goes through."""


def collect_files(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    recursive: bool,
    report: IngestReport,
    names: dict[Path, str] | None = None,
) -> list[tuple[Path, FileType]]:
    """Expand paths to supported files; unsupported ones and links not followed go to the report.

    ``names`` receives the source name of each file (resolved path): its path
    relative to the folder given, with ``/`` separators, or its file name when
    the file itself was given. A file reached twice keeps its first name.
    """
    names = {} if names is None else names
    given: list[Any] = [paths]
    if isinstance(paths, Iterable) and not isinstance(paths, (str, os.PathLike)):
        given = list(paths)
    if not all(isinstance(p, (str, os.PathLike)) for p in given):
        msg = f"paths must be a file or folder path, or a list of them; got {paths!r}"
        raise IngestError(msg)
    if not given:
        msg = "no path given: pass at least one file or folder"
        raise IngestError(msg)
    candidates: list[tuple[Path, str]] = []
    for raw in given:
        path = Path(raw).expanduser()
        if not path.exists():
            msg = f"path not found: {raw}"
            raise IngestError(msg, path=path)
        if not path.is_dir():
            candidates.append((path, path.name))
            continue
        found = _walk(path, recursive=recursive, report=report)
        if not found:
            msg = f"folder is empty: {raw} (no files to ingest; hidden files are ignored"
            msg += ", and so are links out of the folder)" if report.links_skipped else ")"
            raise IngestError(msg, path=path)
        candidates.extend(found)
    files: list[tuple[Path, FileType]] = []
    for path, name in candidates:
        resolved = path.resolve()
        if resolved in names:
            continue
        names[resolved] = name
        file_type = SUPPORTED_EXTENSIONS.get(resolved.suffix.lower())
        if not resolved.is_file():
            report.files_skipped.append((str(resolved), "not a regular file"))
        elif file_type is None:
            kinds = ", ".join(sorted(SUPPORTED_EXTENSIONS))
            reason = f"unsupported file type {resolved.suffix or '(none)'!r} (supported: {kinds})"
            report.files_skipped.append((str(resolved), reason))
        else:
            files.append((resolved, file_type))
    return files


def _walk(root: Path, *, recursive: bool, report: IngestReport) -> list[tuple[Path, str]]:
    """The non-hidden files under ``root``, each with its path relative to ``root``.

    Links are followed as the module says, looked at after every real folder is
    listed (so a file reached both ways keeps its real name); an unreadable
    sub-folder is reported.

    Raises:
        IngestError: If ``root`` itself cannot be listed.
    """
    top = root.resolve()
    listed: set[tuple[int, int]] = set()
    found: list[tuple[Path, str]] = []
    folders: list[Path] = [root]
    links: list[Path] = []
    while folders or links:
        if not folders:
            link = links.pop(0)
            if link.is_dir() and not recursive:
                continue  # a sub-folder, as any other
            reason = _refused_link(link, top, listed)
            if reason:
                report.links_skipped.append((str(link), reason))
            elif link.is_dir():
                folders.append(link)
            else:
                found.append((link, link.relative_to(root).as_posix()))
            continue
        folder = folders.pop(0)
        try:
            status = folder.stat()
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError as exc:
            if folder == root:
                msg = f"cannot read folder {root}: {exc.strerror or exc}"
                raise IngestError(msg, path=root) from exc
            reason = f"unreadable folder: {exc.strerror or exc}"
            report.files_skipped.append((str(folder.resolve()), reason))
            continue
        if (status.st_dev, status.st_ino) in listed:
            continue
        listed.add((status.st_dev, status.st_ino))
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                links.append(path)
            elif entry.is_dir():
                folders.extend([path] if recursive else [])
            else:
                found.append((path, path.relative_to(root).as_posix()))
    return found


def _refused_link(link: Path, top: Path, listed: set[tuple[int, int]]) -> str | None:
    """Why a symbolic link under the folder ``top`` is not followed; None to follow it."""
    try:
        target = link.resolve(strict=True)
    except FileNotFoundError:
        return f"broken link (to {os.readlink(link)})"
    except (OSError, RuntimeError):  # ELOOP, or RuntimeError before Python 3.13
        return "link loop (it never reaches a file or folder)"
    if not target.is_relative_to(top):
        return f"link to {target}, outside {top}: links are followed inside the folder only"
    status = target.stat()
    if target.is_dir() and (status.st_dev, status.st_ino) in listed:
        loop = link.parent.resolve().is_relative_to(target)
        return f"link to {target}, " + (
            "a folder that holds it (a loop)" if loop else "a folder already walked"
        )
    return None
