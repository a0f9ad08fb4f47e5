"""Garbage collection paused while a process imports, then what the imports made frozen.

Start-up allocates nearly everything a short process keeps (the modules of SQLAlchemy,
pydantic, grpc ...), and the collector walks that heap again each time it grows: about
a tenth of a one-task ``leoflow run``'s CPU went to ~170 collections. So the entry
point pauses collection (``pause``); once the imports are done, ``settled`` moves
everything alive into the permanent generation (``gc.freeze``), which later collections
no longer walk, and collection resumes as usual for what the command allocates.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Call first in a process's entry point."""
    global _paused
    _paused = gc.isenabled()
    gc.disable()


def settled() -> None:
    """The imports are done: freeze them and collect as usual. Only undoes ``pause``."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
