"""What to do about it: ranked findings (each cause with its what-if gain where the window was replayed, else the span
of lost device time with its headroom, and its advice) and the plain-English verdicts on each figure.

Modules (each public): ``findings``, ``replayed``, ``idle_advice``, ``verdicts``. Nothing is imported here: import the module.
"""
