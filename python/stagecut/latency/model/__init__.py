"""The latency model every method shares, and its evaluators.

One request of a DAG on heterogeneous devices, in the form the three papers share: the devices
and their links (:mod:`~stagecut.latency.model.devices`: any devices with a transfer per device
pair as in DiviML, the GPUs in servers of QuickP, the PCIe star of Tarnawski et al. 2020), the
problem as dense arrays (:mod:`~stagecut.latency.model.problem`), the result on the shared
result protocol (:mod:`~stagecut.latency.model.schedule`), and the one evaluator of the
``"asap"`` semantics with QuickP's rank round-robin order (:mod:`~stagecut.latency.model.evaluate`,
the reference; :mod:`~stagecut.latency.model._fast`, the same arithmetic in the Rust core, the
fitness of every heuristic). Every solver in the sibling packages returns a schedule re-scored
here (or, for the PCIe star's ``"pieces"`` semantics, by :mod:`stagecut.latency.pcie.pieces`).
"""
