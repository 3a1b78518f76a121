"""The choices and defaults the subcommands' parsers show, without importing the solvers.

A subcommand's ``--help`` builds its parser only: the ``--method`` choices and the default
``--max-ideals`` come from here rather than from the solver packages (whose import loads numpy,
networkx and the Rust core). The solvers' own constants stay the reference: the tests hold these
equal to them (``tests/cli/test_startup.py``).
"""

from __future__ import annotations

__all__ = ["PARTITION_METHODS", "PARTITION_MAX_IDEALS", "SLICE_METHODS", "CERTIFY_LEVELS", "CERTIFY_EXTRA_LEVELS",
           "LATENCY_METHODS"]

#: ``stagecut.throughput.METHODS``
PARTITION_METHODS = ("auto", "dp", "dpl", "ip", "local-search", "pipedream", "scotch")
#: ``stagecut.throughput.DEFAULT_MAX_IDEALS``
PARTITION_MAX_IDEALS = 200_000
#: ``stagecut.mtpp.METHODS``
SLICE_METHODS = ("brkga", "random", "mla", "mla-weighted", "spectral-order", "multilevel", "dp", "order", "auto")
#: ``stagecut.mtpp.LEVELS``
CERTIFY_LEVELS = ("simple", "node-cut", "crossing", "cover", "prefix", "spectral", "sdp", "subgraph", "block",
                  "bottleneck", "bottleneck-guess", "exact")
#: ``stagecut.mtpp.bounds.EXTRA_LEVELS`` (not in ``LEVELS``)
CERTIFY_EXTRA_LEVELS = ("partition-lp",)
#: ``stagecut.mtpp.certify.PARTITION_LP_GROUPS``
CERTIFY_PARTITION_LP_GROUPS = 100
#: ``stagecut.latency.solve.METHODS``
LATENCY_METHODS = ("auto", "best-device", "met", "greedy", "heft", "sa", "ea", "local", "milp", "split", "brute",
                   "pcie-greedy", "ip", "quickp", "quickp-p1", "metis", "mcmc", "m-heft", "m-greedy", "m-topo",
                   "m-chain", "lns")
