"""The latency model every method shares, and its evaluators.

One request of a DAG on heterogeneous devices: the devices and their links
(:mod:`~stagecut.latency.model.devices`), the problem as dense arrays
(:mod:`~stagecut.latency.model.problem`), the result on the shared result protocol
(:mod:`~stagecut.latency.model.schedule`), and the one evaluator of the ``"asap"`` semantics
(:mod:`~stagecut.latency.model.evaluate`, the reference; :mod:`~stagecut.latency.model._fast`,
the same arithmetic in the Rust core, the fitness of every heuristic). The model is the general
one of DiviML ("A Module-based Heuristic for Mapping Neural Networks onto Heterogeneous
Platforms"), with QuickP's rank round-robin order;
every solver in the sibling packages returns a schedule re-scored here.
"""
