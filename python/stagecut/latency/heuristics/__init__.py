"""Constructive list schedulers and searches over placements (no proof of optimality).

:mod:`~stagecut.latency.heuristics.constructive`: best single device, MET, DiviML's greedy
and HEFT (Topcuoglu et al., IEEE TPDS 2002);
:mod:`~stagecut.latency.heuristics.memaware`: list schedulers that treat memory as a resource
(after Baechi's m-TOPO / m-ETF / m-SCT);
:mod:`~stagecut.latency.heuristics.search`: simulated annealing, the (1+1) EA and local search
over device strings; :mod:`~stagecut.latency.heuristics.lns`: large-neighbourhood search that
re-optimises windows exactly; :mod:`~stagecut.latency.heuristics.partition_baselines`: the
Metis-style balanced cut and MCMC that QuickP compares against. Each answer is re-scored by the
evaluator of :mod:`stagecut.latency.model` and is a start for the methods after it.
"""
