"""The work of each op and the device's roofline: what the busy time did, and how close to its peak it came.

``formulas`` (FLOPs and bytes of each op family, vectorised), ``op_models`` (which ops are modelled, their parameters
read from recorded shapes), ``op_owners`` (which op owns each device event, forward or backward: autograd's nodes
linked to their forward op by sequence number; recomputation), ``op_work`` (each modelled op's work beside its device
time), ``roofline`` (peak TFLOP/s
per dtype and bandwidth per device model, from the datasheets), ``kernel_classes`` (GEMM, attention, convolution,
elementwise, reduction, copy, communication, other), ``efficiency`` (per class, the ops losing most time, MFU and HFU:
``kernel_efficiency``, the one call). Imports only from ``reading/``, ``device/`` and ``host/``.
"""
