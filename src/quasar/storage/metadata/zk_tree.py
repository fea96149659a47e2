"""The ZooKeeper store's whole-tree work: listing what is visible, collecting and
deleting a subtree, and removing parents left empty.

Functions over a ``ZooKeeperSession``; ``zookeeper.ZooKeeperMetadataStore`` calls
them. Paths are store keys (the session maps them to znodes below the chroot).
"""

from __future__ import annotations

from functools import partial

from kazoo.exceptions import BadVersionError, NoNodeError, NotEmptyError

from quasar.storage.metadata.zk_client import ZooKeeperSession

__all__ = [
    "DELETE_BATCH_MAX",
    "ZOOKEEPER_RESERVED",
    "delete_all",
    "parent",
    "prune",
    "raw_children",
    "subtree",
    "visible_children",
]

# Deletions per ZooKeeper multi-op in delete_recursive: a subtree up to this size is
# removed atomically; a larger one in several steps, leaves first.
DELETE_BATCH_MAX = 500
# The ensemble's own znodes when there is no chroot: never listed or deleted.
ZOOKEEPER_RESERVED = "zookeeper"


def parent(path: str) -> str:
    """The parent of an absolute path (``/`` for a top-level one)."""
    up = path.rsplit("/", 1)[0]
    return up or "/"


def visible_children(
    zk: ZooKeeperSession, path: str, names: list[str], deadline: float
) -> list[str]:
    """Of the znode children ``names`` of ``path``, the sorted names that hold a key
    or have something below them.

    Raises:
        MetadataError: ZooKeeper failed or timed out.
    """
    if path == "/" and not zk.chroot:
        names = [n for n in names if n != ZOOKEEPER_RESERVED]
    base = "" if path == "/" else path
    stats = zk.wait_all("children", deadline, [
        (f"{base}/{name}", partial(zk.client.exists_async, zk.znode(f"{base}/{name}")))
        for name in names
    ])
    # An empty implicit parent (left by an expired ephemeral key or a crash between a
    # delete and its clean-up) has nothing below it: not a child.
    return sorted(
        name for name, stat in zip(names, stats, strict=True)
        if stat is not None and not isinstance(stat, Exception)
        and (stat.dataLength > 0 or stat.numChildren > 0)
    )


def subtree(zk: ZooKeeperSession, path: str, deadline: float) -> list[str]:
    """Every znode of the subtree at ``path``, parents before children (the
    chroot itself excluded when ``path`` is the root)."""
    client = zk.client
    if path == "/":
        level = [f"/{n}" for n in raw_children(zk, "/", deadline)]
    else:
        level = [path]
    found: list[str] = []
    while level:
        listed = zk.wait_all("delete_recursive", deadline, [
            (p, partial(client.get_children_async, zk.znode(p))) for p in level
        ])
        # A znode that is gone (never there, or deleted meanwhile) is not listed.
        found.extend(
            p for p, names in zip(level, listed, strict=True)
            if not isinstance(names, Exception)
        )
        level = [
            ("" if p == "/" else p) + "/" + name
            for p, names in zip(level, listed, strict=True)
            if not isinstance(names, Exception)
            for name in names
        ]
    return found


def raw_children(zk: ZooKeeperSession, path: str, deadline: float) -> list[str]:
    """Every znode child of ``path`` (``[]`` when it does not exist), ZooKeeper's own
    subtree left out."""
    try:
        names: list[str] = zk.wait(
            "children", path, deadline,
            partial(zk.client.get_children_async, zk.znode(path)),
        )
    except NoNodeError:
        return []
    if path == "/" and not zk.chroot:
        names = [n for n in names if n != ZOOKEEPER_RESERVED]
    return names


def delete_all(zk: ZooKeeperSession, doomed: list[str], deadline: float) -> bool:
    """Delete the znodes, children first; False if the tree changed meanwhile."""
    ordered = list(reversed(doomed))
    if not ordered:
        return True
    for start in range(0, len(ordered), DELETE_BATCH_MAX):
        txn = zk.client.transaction()
        for p in ordered[start : start + DELETE_BATCH_MAX]:
            txn.delete(zk.znode(p))
        results = zk.wait("delete_recursive", ordered[-1], deadline, txn.commit_async)
        if any(isinstance(r, Exception) for r in results):
            return False
    return True


def prune(zk: ZooKeeperSession, path: str, deadline: float) -> None:
    """Remove empty implicit parents from ``path`` upwards.

    Each removal names the znode version it saw, so a parent that became a key
    meanwhile stays; one that gained a child fails with NotEmpty and stays too.
    """
    while path != "/":
        znode = zk.znode(path)
        try:
            stat = zk.wait("prune", path, deadline, partial(zk.client.exists_async, znode))
            if stat is None or stat.dataLength > 0 or stat.numChildren > 0:
                return
            zk.wait("prune", path, deadline, partial(
                zk.client.delete_async, znode, version=stat.version))
        except (BadVersionError, NotEmptyError):
            return
        except NoNodeError:
            pass
        path = parent(path)
