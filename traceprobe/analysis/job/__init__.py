"""Who waited for whom across ranks: collectives matched within each process group, point-to-point transfers paired,
collective types, clock offsets, the ranks of each window, waits, stragglers and their causes, summaries (a rank's
part of the dependency graph among their tables), and the whole-job report (every figure's distribution across ranks,
each window replayed).

Modules (each public): ``collectives``, ``process_groups``, ``comm_types``, ``p2p``, ``clocks``, ``ranks``, ``causes``,
``blame``, ``cause_tables``, ``summaries``, ``graph_tables``, ``window_replay``, ``rank_summary``, ``job``. Nothing is
imported here: import the module.
"""
