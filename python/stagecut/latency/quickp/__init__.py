"""QuickP: operator fusion, critical-path co-location and the reduced placement IPs.

Implements QuickP's pipeline for placing large operator graphs (TensorFlow / PyTorch training
graphs with many zero-cost operators) on homogeneous GPUs in servers: fuse the graph
(:mod:`~stagecut.latency.quickp.fusion`, the paper's Algorithm 1), co-locate nodes along
critical paths (:mod:`~stagecut.latency.quickp.colocate`), solve the reduced IP P1 or P2 on the
fused graph and map the answer back (:mod:`~stagecut.latency.quickp.ip`, with the per-edge
tensor schedules and warm starts of :mod:`~stagecut.latency.quickp.edge_schedules`). Operator
graphs in the networkx node-link format QuickP publishes are read by
:mod:`~stagecut.latency.quickp.opgraph`; :mod:`~stagecut.latency.quickp.synthetic_opgraphs`
writes CNN, transformer and AlexNet/VGG-like training graphs in that format. The public entry
point is :func:`stagecut.latency.quickp` (``place(method="quickp")``): that attribute is the
function, so import this package's modules with ``from stagecut.latency.quickp import ip``
(``import stagecut.latency.quickp.ip as ...`` would look ``ip`` up on the function).
"""
