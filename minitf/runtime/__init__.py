"""What TF calls ``core/common_runtime``: the devices of a process, GPU memory, the placer, the
step graph and its partitions, the executor and its thread pools, sessions, tracing and the
simulator.

Book sections: "Managing the GPU RAM", "Placing Operations on Devices", "Parallel Execution"
and "Control Dependencies".
"""
