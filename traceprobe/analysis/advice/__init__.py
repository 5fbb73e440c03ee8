"""What to do about it: ranked findings (each span of lost device time, its cause, its headroom and its advice) and
the plain-English verdicts on each figure.

Modules (each public): ``findings``, ``idle_advice``, ``verdicts``. Nothing is imported here: import the module.
"""
