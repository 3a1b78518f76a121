"""The brute-force and DP sweeps the bound tests share: seeds in chunks, random instances, a check."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from stagecut.mtpp.model import MtppProblem


def chunk_seeds(base: int, chunk: int, size: int) -> range:
    """The seeds of chunk ``chunk`` (``size`` of them) of a sweep starting at ``base``."""
    return range(base + chunk * size, base + (chunk + 1) * size)


def sweep(check: Callable[[MtppProblem, float, int], object], seeds: Iterable[int],
          reference: Callable[[MtppProblem], float], *, n_max: int, k_max: int,
          transform: Callable[[int, MtppProblem], MtppProblem] | None = None) -> int:
    """``check(problem, reference(problem), seed)`` on ``random_problem`` of each seed (changed by
    ``transform(seed, problem)`` when given); the number of checks that returned a true value."""
    from tests.mtpp.test_combinatorial import random_problem  # (that module uses these sweeps too)

    count = 0
    for s in seeds:
        p = random_problem(s, n_max=n_max, k_max=k_max)
        if transform is not None:
            p = transform(s, p)
        count += bool(check(p, reference(p), s))
    return count


def optimum_sweep(check: Callable[[MtppProblem, float, int], object],
                  sweeps: dict[str, tuple[Callable[[MtppProblem], float], int, int, int, int]],
                  against: str, chunk: int) -> int:
    """One chunk of a slow sweep: ``sweeps[against]`` is ``(reference, first seed, seeds per chunk,
    n_max, k_max)``."""
    reference, base, size, n_max, k_max = sweeps[against]
    done: list[int] = []

    def counted(p: MtppProblem, opt: float, s: int) -> object:
        done.append(s)
        return check(p, opt, s)

    found = sweep(counted, chunk_seeds(base, chunk, size), reference, n_max=n_max, k_max=k_max)
    assert len(done) == size, (against, chunk, len(done))  # every seed of the chunk was checked
    return found
