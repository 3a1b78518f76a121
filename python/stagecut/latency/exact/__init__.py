"""Exact methods and the lower bounds that certify answers.

:mod:`~stagecut.latency.exact.milp`: the MILP for one request of DiviML ("A Module-based
Heuristic for Mapping Neural Networks onto Heterogeneous Platforms"), built in bulk from the pieces of
:mod:`~stagecut.latency.exact.milp_build` (greedy start, transitive closure, transfer table, the
row sink that hands rows to the solver as arrays); :mod:`~stagecut.latency.exact.bounds`: lower
bounds that see memory and communication; :mod:`~stagecut.latency.exact.brute`: brute force
over small graphs, the oracle the tests hold every other method and bound against.
"""
