"""What the host was doing: host-thread concurrency, the link from each device event to the call that launched it,
warm-up and first calls, graph captures, training evidence, the Python function the host was in (stacks), the class
of each host event, and why each device was idle (what the host was in during every idle nanosecond).

Modules (each public): ``host_threads``, ``launch_links``, ``warmup``, ``graph_capture``, ``training``,
``host_classes``, ``idle_causes``, ``warmup_notes``, ``python_frames``. Nothing is imported here: import the module.
"""
