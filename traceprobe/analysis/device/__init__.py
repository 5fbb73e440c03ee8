"""What each device did, and when: busy intervals per stream and device, copy/compute, comm/compute and CPU/GPU
overlap, concurrency across devices and streams, the GPU time breakdown, steps and per-step figures, top kernels and
queue time, idle gaps, the profiled window, and the time series the timelines draw.

Modules (each public): ``busy``, ``overlap``, ``concurrency``, ``breakdown``, ``steps``, ``step_figures``,
``kernels``, ``idle_gaps``, ``profiled``, ``timeline``, ``picture``. Nothing is imported here: import the module.
"""
