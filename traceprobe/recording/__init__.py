"""Recording: running code under ``torch.profiler`` and writing traces with their manifest.

The writing side of traceprobe, kept apart from the reading side (``kineto``,
``trace``, ``intervals``, ``analysis``, ``collect``, ``report``), which it never
imports except where :meth:`Capture.report` is asked for a report.

- :mod:`.record`: ``traceprobe record``, the built-in experiments of :mod:`.workloads`.
- :mod:`.profiler`: ``traceprobe.capture()``/``Capture``/``step()``, profiling your own code,
  in windows of steps (:mod:`.windows`); :mod:`.runner` runs ``record --script/--module``.
- :mod:`.trace_files`: default folders and names, exporting a profiler's trace.
- :mod:`.environment`: machine facts, ``resolve_device()``; :mod:`.folder_lock`: one recording
  per folder; :mod:`.launch`: child jobs (torchrun) that never outlive ``record``.
- :mod:`.quiet`: Kineto's USDT lines kept off stderr; :mod:`.teardown`: what lives until
  interpreter exit so that gloo ranks end.

Importing this package imports neither torch nor pandas.
"""
