"""Path rules shared by the metadata-store implementations.

Keys are absolute ``/``-separated paths (``/managed-ledgers/t%2Fx/sub``). A path
"has children" when any key lies below it, whether or not the path itself holds a
value: both stores derive ``children`` from the keys, so neither needs to create
parent nodes and a deleted parent can never leave its children unreachable.
"""

from __future__ import annotations


def validate(path: str) -> None:
    """Check that ``path`` is a well-formed key.

    Raises:
        ValueError: the path is relative, ends with ``/`` (other than the root), has
            an empty segment or contains a NUL character.
    """
    if not path.startswith("/"):
        raise ValueError(f"metadata path must be absolute: {path!r}")
    if path != "/" and (path.endswith("/") or "//" in path):
        raise ValueError(f"metadata path has an empty segment: {path!r}")
    if "\x00" in path:
        raise ValueError("metadata path contains NUL")


def subtree_bounds(path: str) -> tuple[str, str]:
    """The half-open string range ``[lo, hi)`` holding every key strictly below ``path``.

    Every descendant starts with ``path + "/"``; the next character after ``/`` is
    ``0``, so ``path + "0"`` is the first string past the subtree.
    """
    prefix = "/" if path == "/" else path + "/"
    return prefix, prefix[:-1] + "0"


def child_name(prefix: str, key: str) -> tuple[str, bool]:
    """The direct-child name of ``key`` under ``prefix`` and whether ``key`` is deeper."""
    rest = key[len(prefix) :]
    name, sep, _ = rest.partition("/")
    return name, bool(sep)
