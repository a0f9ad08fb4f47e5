"""asyncio helpers with no I/O library: loops that adapters share (``office``), and
bounded waits that never swallow a cancellation (``waits``).

Bottom layer, beside ``domain`` (which must stay free of asyncio) and
``protocol``: it imports only the standard library — never another leoflow
package, never a database, network or Kubernetes library.
"""
