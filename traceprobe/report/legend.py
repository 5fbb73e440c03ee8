"""The words under the summary table: what its columns, levels, marks and lines mean (one sentence each)."""

LEGEND = ("figures: the highest verdict of each (yes >= 50%, some >= 5%, no < 5%); busy: mean GPU utilization; "
          "the top finding (↳): per step first, the window's total in brackets")
SHORT_LEGEND = ("copy, devs, strm, comm, cpu, thr: the highest verdict of copy/compute, cross-device, stream, comm/compute, "
                "CPU/GPU and host-thread overlap, its level a letter (y yes >= 50%, s some >= 5%, n no < 5%); busy: mean GPU "
                "utilization; ↳ the top finding, per step first, the window's total in brackets")
DO_LEGEND = ("do: the one action the top finding calls for; its full advice is under 'what would give time back' (what-ifs) "
             "or in --detail's findings")
NOT_JUDGED_LEGEND = "n/a: copies not meant to overlap (a data-parallel wrapper's gradient bucket copies): measured, not judged"
STOPWATCH = ("each timed variant's wall-clock speed-up over its workload's first variant, set against what its trace "
             "shows (more overlap, less work)")
"""What the stopwatch line compares, in one sentence."""
SHORT_RANK_LEGEND = ("work/comm r1/r0: rank 1 ran the most device work outside collectives, rank 0 spent the most time in "
                     "collectives, waiting included (no rank is called slowest: the rank ahead waits for the others); "
                     "step ms and the % columns: min-max across the window's ranks; 2strm%: the share of device busy time "
                     "with two or more streams busy (strm above: of the time its side streams were busy)")
RANK_LEGEND = ("most work: the rank with the most device work outside collectives; most comm: the rank with the most "
               "time in collectives, waiting included (no rank is called slowest: the rank ahead waits for the others); "
               "2+ streams: the share of device busy time with two or more streams busy (streams above: of the time its "
               "side streams were busy)")


HOST_ONLY = ("no device work in these traces (recorded without a GPU?): only host-thread concurrency is judged, "
             "the device figures read '-'")
"""The note of a summary whose traces hold host threads only, none of them launching device work."""
HOST_ONLY_JUDGED = "only host-thread concurrency is judged, the device figures read '-'"
"""What a summary whose traces hold host threads only is judged by: said after why they do (:func:`host_only_line`)."""


def host_only_line(notes: list[str], traces: int) -> str:
    """The note of a summary of ``traces`` traces that hold host threads only, given the notes of those that launched
    device work but recorded none (:func:`traceprobe.analysis.device.profiled.not_recorded_notes`, one each): without
    any, :data:`HOST_ONLY`; else how to record it, e.g. ``device activity not recorded: add ProfilerActivity.CUDA: only
    host-thread concurrency is judged, ...`` (``in 1 of 2 traces`` where not all are so)."""
    if not notes:
        return HOST_ONLY
    head, _, advice = notes[0].partition(" (")[0].partition(": ")
    some = f" in {len(notes)} of {traces} traces" if len(notes) < traces else ""
    return f"{head}{some}: {advice}: {HOST_ONLY_JUDGED}"
