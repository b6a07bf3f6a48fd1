"""minitf's version (one place: the package, ``minitf.smi`` and the benches print it)."""

__version__ = "0.1.0"
