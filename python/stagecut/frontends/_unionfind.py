"""The union-find of the front ends' colocation classes (string keys; a class is named by its
first-added key), apart so that :mod:`stagecut.frontends._common` and
:mod:`stagecut.frontends.shared` both use it without importing each other."""

from __future__ import annotations

__all__ = ["UnionFind"]


class UnionFind:
    """Colocation classes: ``union(a, b)`` merges; ``find(a)`` is the class's first-added key."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, a: str) -> str:
        self.parent.setdefault(a, a)
        root = a
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[a] != root:
            self.parent[a], a = root, self.parent[a]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
