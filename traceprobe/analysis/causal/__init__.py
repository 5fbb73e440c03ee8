"""Why each step took as long as it did: the job's dependency graph across host, devices and process groups (with the
event waits the trace recorded), its critical path, what removing each cause would give back (what-ifs, replayed), the compute slowed beside waiting
collectives, and each window's top cause in words.

Modules (each public): ``dependency_graph``, ``event_waits``, ``what_if``, ``contention``, ``imbalance``, ``what_if_order``,
``what_if_steps``, ``sync_names``, ``critical_path``, ``what_if_windows``.
Nothing is imported here: import the module.
"""
