"""Why each step took as long as it did: the job's dependency graph across host, devices and process groups (with the
event waits the trace recorded), its critical path, what removing each cause would give back (what-ifs, replayed), the compute slowed beside waiting
collectives, and each window's top cause in words.

Modules (each public but one): ``dependency_graph``, ``device_chains`` (its device ops on their streams and their edges), ``class_times`` (its host time by class, held sparse), ``held_times`` (the time
each cause holds on each rank, read from those entries), ``event_waits``, ``what_if``, ``sweep`` (the replay as one sweep in a
topological order), ``packed`` (a window's graphs packed for its replay), ``replay_memory`` (the memory a replay takes, and its
budget), ``contention``, ``imbalance``, ``unseen_peers``, ``what_if_plan`` (which what-ifs to replay: bounds
from the critical paths), ``what_if_table`` (the table from the replayed rows), ``what_if_order``, ``what_if_steps``,
``sync_names``, ``critical_path``, ``what_if_windows``, ``what_if_advice`` (each cause's name and action in words),
``what_if_kernels`` (faster kernels and fused chains as device-time causes), ``sweep_aot`` (the sweep's compiled loops built
ahead of time, at install); ``_sweep_kernels``, the sweep's compiled loops (numba), imported by ``sweep`` alone (and
built from its source by ``sweep_aot``).
Nothing is imported here: import the module.
"""
