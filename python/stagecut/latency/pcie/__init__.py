"""The PCIe star of the throughput workloads' authors: their latency semantics, greedy and IP.

Implements the latency side of Tarnawski et al., "Efficient Algorithms for Device Placement of
DNN Graph Operators" (NeurIPS 2020), whose latency inputs ship with the shared workloads
(seed 000): :mod:`~stagecut.latency.pcie.pieces` is their ``computeLatency`` semantics (an
accelerator's nodes run as contiguous pieces behind a CPU pool),
:mod:`~stagecut.latency.pcie.greedy` their greedy that packs colour-class blocks onto
accelerators in topological order, and :mod:`~stagecut.latency.pcie.ip` their latency IP with
``q`` contiguous slots per accelerator.
"""
