"""What TF calls ``python/framework`` (and the kernel-facing parts of ``core/framework``):
graphs, operations, tensors, device specs, dtypes, shapes, errors, resource containers and the
rendezvous.  Nothing here runs a graph.

Book sections: "Placing Operations on Devices" (device strings and scopes) and every example
that builds a graph.
"""
